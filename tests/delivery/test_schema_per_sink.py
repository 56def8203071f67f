"""A schema per sink and the ``[metrics]`` table, through the agent's own start-up path (settings
file -> runtime -> the cycle) into the real stores: one agent feeds Prometheus in the ``dcgm``
schema and VictoriaMetrics in ``falcon_gpu``; each store holds exactly its schema's names, and a
spy on the schemas' ``render`` shows each rendered once a cycle (and one no sink reads, never)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.agent.commands import _runner
from falcon_gpu.agent.runtime import build
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.samples import PromBatch
from falcon_gpu.schemas import dcgm, falcon_gpu
from falcon_gpu.schemas.selection import MetricSelection
from falcon_gpu.settings import load_settings
from tests.delivery.conftest import ManagedServer, http_get, wait_until

pytestmark = pytest.mark.servers
CYCLES = 2


def write_config(tmp_path: Path, body: str, sinks: list[dict[str, Any]]) -> Path:
    lines = ['node = "per-sink-node"', "interval = 1", f'spool_dir = "{tmp_path / "spool"}"', body]
    for sink in sinks:
        lines.append("[[sinks]]")
        lines.extend(f"{k} = {json.dumps(v)}" for k, v in sink.items())
    path = tmp_path / "falcon-gpu.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def remote_write(url: str, **extra: Any) -> dict[str, Any]:
    return {"type": "remote_write", "url": url + "/api/v1/write", "stale_on_shutdown": False, **extra}


class RenderSpy:
    """Counts each schema's renders (the registry looks ``render`` up on the module at each call)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: Counter[str] = Counter()
        self.last: dict[str, PromBatch] = {}
        for module, name in ((falcon_gpu, "falcon_gpu"), (dcgm, "dcgm")):
            monkeypatch.setattr(module, "render", self._counting(name, module.render))

    def _counting(
        self, name: str, render: Callable[[CycleData, MetricSelection, Any], PromBatch]
    ) -> Callable[[CycleData, MetricSelection, Any], PromBatch]:
        def counted(cycle: CycleData, selection: MetricSelection, kept: Any) -> PromBatch:
            self.calls[name] += 1
            self.last[name] = batch = render(cycle, selection, kept)
            return batch

        return counted


def run_agent(config: Path) -> None:
    rt = build(load_settings(config), simulate="default")
    try:
        runner = _runner(rt, step=1)
        for _ in range(CYCLES):
            runner.run()
    finally:
        rt.close(15.0)


def names_in(server: ManagedServer, expected: set[str]) -> set[str]:
    """Every metric name the store holds, once it holds at least ``expected``."""

    def names() -> set[str]:
        return set(json.loads(http_get(server.url + "/api/v1/label/__name__/values"))["data"])

    wait_until(lambda: expected <= names(), 30, f"{sorted(expected - names())} in {server.url}")
    return names()


def test_each_store_gets_its_own_schema_rendered_once_per_cycle(
    prometheus: ManagedServer, victoria: ManagedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = RenderSpy(monkeypatch)
    config = write_config(
        tmp_path,
        'schema = "falcon_gpu"',
        [
            remote_write(prometheus.url, name="nvidia-dashboards", schema="dcgm"),
            remote_write(victoria.url, name="own-names"),  # the agent's schema
            remote_write(victoria.url, name="own-names-again", schema="falcon_gpu"),
        ],
    )
    run_agent(config)
    assert spy.calls == {"dcgm": CYCLES, "falcon_gpu": CYCLES}  # two sinks in falcon_gpu: one render
    want_dcgm = {f.name for f in spy.last["dcgm"].families}
    want_own = {f.name for f in spy.last["falcon_gpu"].families}
    assert "DCGM_FI_DEV_GPU_UTIL" in want_dcgm and "falcon_gpu_utilization_ratio" in want_own
    assert names_in(prometheus, want_dcgm) == want_dcgm
    assert names_in(victoria, want_own) == want_own
    assert not any(name.startswith("DCGM_") for name in want_own)


def test_a_schema_no_sink_reads_is_never_rendered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = RenderSpy(monkeypatch)
    config = write_config(tmp_path, 'schema = "falcon_gpu"', [{"type": "stdout", "schema": "dcgm"}])
    run_agent(config)
    assert spy.calls == {"dcgm": CYCLES}


def test_include_and_exclude_reach_prometheus(prometheus: ManagedServer, tmp_path: Path) -> None:
    """Under ``profile = "full"`` an ``include`` keeps only the families it names."""
    config = write_config(
        tmp_path,
        '[metrics]\nprofile = "full"\n'
        'include = ["falcon_gpu_utilization_ratio", "falcon_gpu_temperature_*", "falcon_gpu_health",'
        ' "falcon_gpu_agent_*"]\n'
        'exclude = ["falcon_gpu_health", "falcon_gpu_agent_cycle_*", "falcon_gpu_agent_cycles_total"]',
        [remote_write(prometheus.url)],
    )
    run_agent(config)
    kept = {"falcon_gpu_utilization_ratio", "falcon_gpu_temperature_celsius", "falcon_gpu_agent_cycles_total"}
    names = names_in(prometheus, kept)
    assert "falcon_gpu_health" not in names  # included, then excluded
    assert "falcon_gpu_memory_used_bytes" not in names  # not included
    assert "falcon_gpu_agent_cycle_seconds" not in names  # an agent family may go
    assert "falcon_gpu_info" not in names
    assert all(
        n.startswith(("falcon_gpu_utilization", "falcon_gpu_temperature", "falcon_gpu_agent_")) for n in names
    )


def test_the_default_profile_include_adds_to_the_lean_set(prometheus: ManagedServer, tmp_path: Path) -> None:
    """The default profile leaves ``performance_state`` and ``memory_reserved_bytes`` out; an
    ``include`` brings one back and keeps the rest of the lean set, ``exclude`` drops one of it."""
    config = write_config(
        tmp_path,
        '[metrics]\ninclude = ["falcon_gpu_performance_state"]\nexclude = ["falcon_gpu_power_limit_watts"]',
        [remote_write(prometheus.url)],
    )
    run_agent(config)
    lean = {"falcon_gpu_info", "falcon_gpu_memory_used_bytes", "falcon_gpu_health_worst"}
    names = names_in(prometheus, lean | {"falcon_gpu_performance_state"})
    assert "falcon_gpu_memory_reserved_bytes" not in names  # full only, not included
    assert "falcon_gpu_power_limit_watts" not in names  # lean, excluded


def test_listen_serves_its_own_schema_beside_a_sink_in_another(
    victoria: ManagedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``listen_schema = "dcgm"`` while the agent's (and the remote_write sink's) schema is
    falcon_gpu: /metrics has dcgm-exporter's names only, the store the agent's own."""
    spy = RenderSpy(monkeypatch)
    body = 'schema = "falcon_gpu"\nlisten = "127.0.0.1:0"\nlisten_schema = "dcgm"'
    settings = load_settings(write_config(tmp_path, body, [remote_write(victoria.url)]))
    rt = build(settings, simulate="default", listen=True)
    try:
        assert rt.listener is not None
        runner = _runner(rt, step=1)
        for _ in range(CYCLES):
            runner.run()
        host, port = rt.listener.address
        page = http_get(f"http://{host}:{port}/metrics").decode()
    finally:
        rt.close(15.0)
    assert spy.calls == {"dcgm": CYCLES, "falcon_gpu": CYCLES}  # listen renders on the cycle's thread
    served = {line.split()[2] for line in page.splitlines() if line.startswith("# TYPE ")}
    assert served == {f.name for f in spy.last["dcgm"].families}
    want_own = {f.name for f in spy.last["falcon_gpu"].families}
    assert names_in(victoria, want_own) == want_own
