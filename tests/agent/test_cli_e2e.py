"""End to end through the real CLI on the simulator: what the scenario says is what comes out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.simulator.scenario.parse import resolve_scenario

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "plugins" / "60_gpu_monitor.py"


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "falcon_gpu", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


def first(v: Any) -> Any:
    return v[0] if isinstance(v, list) else v


def parse_prom(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        name, _, rest = head.partition("{")
        labels = frozenset()
        if rest:
            pairs = []
            for part in rest.rstrip("}").split('",'):
                k, _, v = part.partition('="')
                pairs.append((k, v.rstrip('"')))
            labels = frozenset(pairs)
        out[(name, labels)] = float(value)
    return out


@pytest.fixture(scope="module")
def default_scenario() -> dict[str, Any]:
    return json.loads(resolve_scenario("default").read_text())


def test_run_once_prints_the_scenarios_values(default_scenario: dict[str, Any], tmp_path: Path) -> None:
    proc = cli("run", "--simulate", "--once", "--config", str(_cfg(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    series = parse_prom(proc.stdout)
    gpus = default_scenario["gpus"]
    assert len(gpus) == 4
    for i, g in enumerate(gpus):

        def one(name: str, i: int = i, g: dict[str, Any] = g) -> float:
            hits = [
                v
                for (n, lb), v in series.items()
                if n == name
                and ("uuid", g["uuid"]) in lb
                and ("gpu", str(i)) in lb
                and not any(k == "mig_uuid" for k, _ in lb)
            ]
            assert len(hits) == 1, (name, g["uuid"], hits)
            return hits[0]

        assert one("falcon_gpu_up") == 1
        assert one("falcon_gpu_utilization_ratio") == pytest.approx(first(g["utilization_gpu_percent"]) / 100)
        assert one("falcon_gpu_memory_used_bytes") == first(g["memory_used_bytes"])
        assert one("falcon_gpu_memory_total_bytes") == g["memory_total_bytes"]
        assert one("falcon_gpu_temperature_celsius") == first(g["temperature_celsius"])
        assert one("falcon_gpu_power_watts") == pytest.approx(first(g["power_watts"]))
        assert one("falcon_gpu_energy_joules_total") == pytest.approx(first(g["energy_joules"]))
        assert one("falcon_gpu_sm_clock_hertz") == first(g["sm_clock_mhz"]) * 1e6
    names = {n for n, _ in series}
    assert "falcon_gpu_pod_info" in names, "the bundled node has pods: attribution must run end to end"


def _cfg(tmp_path: Path) -> Path:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'node = "sim-node"\nspool_dir = "{tmp_path / "spool"}"\n')
    return cfg


def validate_falcon_items(items: list[dict[str, Any]]) -> None:
    """Open-Falcon's own rules for what falcon-agent accepts."""
    assert isinstance(items, list)
    for it in items:
        assert set(it) == {"endpoint", "metric", "timestamp", "step", "value", "counterType", "tags"}
        assert type(it["timestamp"]) is int and type(it["step"]) is int and it["step"] > 0
        assert it["counterType"] in ("GAUGE", "COUNTER", "DERIVE")
        assert isinstance(it["value"], (int, float))
        assert it["metric"] and it["endpoint"]
        assert len(it["metric"]) + len(it["tags"]) <= 255
        for ch in "\r\n'\">":
            assert ch not in it["endpoint"] and ch not in it["metric"] and ch not in it["tags"]


def test_plugin_prints_one_valid_array(default_scenario: dict[str, Any], tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(PLUGIN), "--simulate", "--config", str(_cfg(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    items = json.loads(proc.stdout)  # exactly one JSON document, nothing else on stdout
    validate_falcon_items(items)
    assert {it["step"] for it in items} == {60}
    assert {it["endpoint"] for it in items} == {"sim-node"}
    by = {(it["metric"], it["tags"]): it["value"] for it in items}
    g0 = default_scenario["gpus"][0]
    tags = f"GpuId=0,uuid={g0['uuid']}"
    assert by[("GPUUtils", tags)] == pytest.approx(first(g0["utilization_gpu_percent"]))
    assert by[("FBUsed", tags)] == pytest.approx(first(g0["memory_used_bytes"]) / 2**20, abs=1e-3)
    assert by[("GPUCount", "")] == 4
    assert by[("GPUAlive", tags)] == 1
    assert any(m == "PodGPUUtils" for m, _ in by)


def test_plugin_without_nvml_prints_empty_array(tmp_path: Path) -> None:
    """No driver on this machine: the real pynvml fails to load; the plugin must still print []."""
    proc = subprocess.run(
        [sys.executable, str(PLUGIN), "--config", str(_cfg(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == []
    assert "NVML" in proc.stderr or "nvml" in proc.stderr


def test_faulty_node_lost_gpu_reported_not_fatal(tmp_path: Path) -> None:
    scen = json.loads(resolve_scenario("faulty-node").read_text())
    lost = [g for g in scen["gpus"] if g.get("lost_at_cycle") == 0]
    assert lost, "faulty-node must have a GPU lost from cycle 0 for this test"
    proc = cli("run", "--simulate", "faulty-node", "--once", "--config", str(_cfg(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    series = parse_prom(proc.stdout)
    for g in lost:
        ups = [v for (n, lb), v in series.items() if n == "falcon_gpu_up" and ("uuid", g["uuid"]) in lb]
        assert ups == [0]
    healthy = [g for g in scen["gpus"] if g.get("lost_at_cycle") is None]
    for g in healthy:
        ups = [v for (n, lb), v in series.items() if n == "falcon_gpu_up" and ("uuid", g["uuid"]) in lb]
        assert ups == [1]


def test_bad_scenario_exits_2_naming_the_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"gpus": [{"uuid": "GPU-1", "name": "x", "temperature_celsius": "hot"}]}')
    proc = cli("run", "--simulate", str(bad), "--once")
    assert proc.returncode == 2
    assert "gpus[0]" in proc.stderr and "Traceback" not in proc.stderr
