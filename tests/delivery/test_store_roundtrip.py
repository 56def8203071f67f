"""The guard against any future drop: what a store holds is what the agent printed.

For every bundled scenario, a bare-metal node (no Kubernetes) and both Prometheus
schemas, one ``falcon-gpu run --once`` prints its cycle with the stdout sink and
sends the same cycle through remote_write into the real Prometheus (1.0) and
VictoriaMetrics (2.0, falling back to 1.0) and through the Pushgateway. The
series read back from each store (names and labels) must be exactly the printed
ones, with only the labels the store path adds (``job`` and ``instance`` from the
remote_write sink; ``job`` and ``node`` from the Pushgateway's grouping key), and
every value must match. Each case has its own node name, so the three servers are
started once for the module.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from falcon_gpu.simulator.scenario.parse import resolve_scenario
from tests.delivery.conftest import (
    ManagedServer,
    http_get,
    prom_query,
    start_prometheus,
    start_pushgateway,
    start_victoria,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.servers
BUNDLED = ("mixed-4gpu", "mig-node", "shared-gpu", "faulty-node")
SCHEMAS = ("falcon_gpu", "dcgm", "nvidia_smi")

SeriesKey = tuple[str, frozenset[tuple[str, str]]]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ManagedServer]]:
    started: dict[str, ManagedServer] = {}
    try:
        for name, start in (
            ("prometheus", start_prometheus),
            ("victoria", start_victoria),
            ("pushgateway", start_pushgateway),
        ):
            started[name] = start(tmp_path_factory.mktemp(name))
        yield started
    finally:
        for server in started.values():
            server.stop()


def bare_metal(tmp_path: Path) -> Path:
    """mixed-4gpu without its ``host``: no kubelet, no cgroups, every process outside a pod."""
    scenario = json.loads(resolve_scenario("mixed-4gpu").read_text())
    del scenario["host"]
    path = tmp_path / "bare-metal.json"
    path.write_text(json.dumps(scenario))
    return path


def run_once(tmp_path: Path, node: str, scenario: str, schema: str, stores: dict[str, ManagedServer]) -> str:
    sinks = [
        {"type": "stdout", "format": "json"},
        {"type": "remote_write", "url": stores["prometheus"].url + "/api/v1/write"},
        {
            "type": "remote_write",
            "name": "victoria",
            "url": stores["victoria"].url + "/api/v1/write",
            "version": 2,
        },
        {"type": "pushgateway", "url": stores["pushgateway"].url},
    ]
    lines = [
        f'node = "{node}"',
        f'schema = "{schema}"',
        "process_metrics = true",
        f'spool_dir = "{tmp_path / "spool"}"',
    ]
    for sink in sinks:
        lines.append("[[sinks]]")
        lines.extend(f"{k} = {json.dumps(v)}" for k, v in sink.items())
    config = tmp_path / "falcon-gpu.toml"
    config.write_text("\n".join(lines) + "\n")
    argv = [
        sys.executable,
        "-m",
        "falcon_gpu",
        "run",
        "--once",
        "--simulate",
        scenario,
        "--config",
        str(config),
    ]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "invalid series" not in done.stderr and "refused" not in done.stderr, done.stderr
    return done.stdout


def printed(stdout: str) -> tuple[int, dict[SeriesKey, float]]:
    (line,) = stdout.splitlines()
    cycle = json.loads(line)
    out = {}
    for s in cycle["samples"]:
        labels = frozenset((k, v) for k, v in s["labels"].items() if v != "")
        out[(s["name"], labels)] = float(s["value"])
    return int(cycle["timestamp_ms"]), out


def key_of(metric: dict[str, str]) -> SeriesKey:
    name = metric["__name__"]
    return name, frozenset((k, v) for k, v in metric.items() if k != "__name__")


def from_prometheus(server: ManagedServer, node: str, ts: int) -> dict[SeriesKey, float]:
    out = {}
    for r in prom_query(server, f'{{instance="{node}"}}[10m]', at=ts + 1):
        values = [float(v) for t, v in r["values"] if round(float(t) * 1000) == ts]
        assert len(values) == 1, r
        out[key_of(r["metric"])] = values[0]
    return out


def from_victoria(server: ManagedServer, node: str, ts: int) -> dict[SeriesKey, float]:
    http_get(server.url + "/internal/force_flush")
    query = urllib.parse.urlencode({"match[]": f'{{instance="{node}"}}'})
    out = {}
    for line in http_get(f"{server.url}/api/v1/export?{query}").decode().splitlines():
        row = json.loads(line)
        values = [float(v) for t, v in zip(row["timestamps"], row["values"], strict=True) if t == ts]
        assert len(values) == 1, row
        out[key_of(row["metric"])] = values[0]
    return out


def from_pushgateway(server: ManagedServer, node: str) -> dict[SeriesKey, float]:
    groups = json.loads(http_get(server.url + "/api/v1/metrics"))["data"]
    (group,) = [g for g in groups if g["labels"].get("node") == node]
    out = {}
    for name, family in group.items():
        if name in ("labels", "last_push_successful") or name.startswith("push_"):
            continue
        for m in family["metrics"]:
            labels = {k: v for k, v in m["labels"].items() if v != ""}
            out[key_of({"__name__": name, **labels})] = float(m["value"])
    return out


def with_labels(series: dict[SeriesKey, float], **added: str) -> dict[SeriesKey, float]:
    return {(name, labels | set(added.items())): v for (name, labels), v in series.items()}


def assert_same(got: dict[SeriesKey, float], want: dict[SeriesKey, float], store: str) -> None:
    missing, extra = set(want) - set(got), set(got) - set(want)
    assert not missing and not extra, f"{store}: missing {sorted(missing)[:5]}, extra {sorted(extra)[:5]}"
    wrong = {
        k: (got[k], v)
        for k, v in want.items()
        if not (math.isclose(got[k], v, rel_tol=1e-12) or (math.isnan(got[k]) and math.isnan(v)))
    }
    assert not wrong, f"{store}: values differ: {list(wrong.items())[:5]}"


CASES = [(s, schema) for s in (*BUNDLED, "bare-metal") for schema in SCHEMAS]


@pytest.mark.parametrize(("scenario", "schema"), CASES)
def test_every_printed_series_is_in_every_store(
    scenario: str, schema: str, stores: dict[str, ManagedServer], tmp_path: Path
) -> None:
    node = f"guard-{scenario}-{schema}".replace("_", "-")
    path = str(bare_metal(tmp_path)) if scenario == "bare-metal" else scenario
    ts, want = printed(run_once(tmp_path, node, path, schema, stores))
    assert len(want) > 20, "a real cycle"
    if scenario == "bare-metal" or scenario == "shared-gpu":
        assert any(dict(lb).get("pod") is None for _, lb in want), "series without a pod are kept"
    remote = with_labels(want, job="falcon_gpu", instance=node)
    assert_same(from_prometheus(stores["prometheus"], node, ts), remote, "Prometheus")
    # VictoriaMetrics makes fresh series searchable within about a second
    wait_until(lambda: len(from_victoria(stores["victoria"], node, ts)) >= len(remote), 15, "VictoriaMetrics")
    assert_same(from_victoria(stores["victoria"], node, ts), remote, "VictoriaMetrics")
    assert_same(
        from_pushgateway(stores["pushgateway"], node),
        with_labels(want, job="falcon_gpu", node=node),
        "Pushgateway",
    )
