"""``falcon-gpu doctor``: a readable table, exit 0 only when everything passes, no secrets."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from falcon_gpu.simulator.scenario.parse import resolve_scenario

ROOT = Path(__file__).resolve().parents[2]


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )


def test_simulated_node_passes_every_check() -> None:
    proc = doctor("--simulate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = proc.stdout.splitlines()
    assert any(r.startswith("OK") and "NVML" in r and "4 GPU(s)" in r for r in rows)
    assert sum(1 for r in rows if re.match(r"OK\s+GPU \d", r)) == 4
    assert any("kubelet socket" in r and r.startswith("OK") for r in rows)
    assert any("GPU processes attributed" in r and "4 of 4" in r for r in rows)
    assert "checks passed" in rows[-1]


def test_missing_driver_and_dead_sink_fail_with_a_fix_and_no_secret(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cr3t-t0ken\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'spool_dir = "{tmp_path / "spool"}"\nkubelet_socket = "{tmp_path / "none.sock"}"\n'
        'kubernetes = "on"\n'
        f'[[sinks]]\ntype = "remote_write"\nurl = "http://127.0.0.1:1/api/v1/write"\n'
        f'bearer_token_file = "{token}"\ntimeout = 1\n'
    )
    proc = doctor("--config", str(cfg))
    assert proc.returncode == 1
    out = proc.stdout
    assert "FAIL  NVML" in out and "libnvidia-ml" in out
    assert any(r.startswith("FAIL") and "kubelet socket" in r for r in out.splitlines())
    assert any(r.startswith("FAIL") and "sink remote_write" in r for r in out.splitlines())
    assert "s3cr3t" not in out + proc.stderr


# -- per-GPU health and the kubernetes setting (issue 8 items 13, 14) -------------------------
def _rows(cfg: Path, simulate: str | None) -> dict[str, tuple[str, str]]:
    from falcon_gpu.doctor import collect_rows
    from falcon_gpu.settings import load_settings

    return {check: (status, detail) for check, status, detail in collect_rows(load_settings(cfg), simulate)}


def test_faulty_node_names_each_gpus_verdict_and_failing_checks(tmp_path: Path) -> None:
    scen = json.loads(resolve_scenario("faulty-node").read_text())
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'spool_dir = "{tmp_path / "spool"}"\n')
    rows = _rows(cfg, "faulty-node")
    for i, g in enumerate(scen["gpus"]):
        status, detail = rows[f"GPU {i}"]
        assert g["uuid"] in detail
        if g.get("lost_at_cycle") == 0:
            assert status == "FAIL" and "GPU is lost" in detail
        elif "hw_thermal" in g.get("clock_event_reasons", []):
            assert status == "FAIL" and "failing thermal" in detail, detail
        elif g.get("inforom_valid") is False:
            assert status == "WARN" and "warning inforom" in detail, detail
        else:
            assert (status, detail.endswith(": healthy")) == ("OK", True), detail
    assert sum(1 for s, _ in rows.values() if s == "FAIL") >= 2


def _bare_metal(tmp_path: Path, kubernetes: str) -> Path:
    """A host without Kubernetes: the GPU processes exist in its /proc, no kubelet, no pod logs."""
    proc = tmp_path / "proc"
    scen = json.loads(resolve_scenario("default").read_text())
    for g in scen["gpus"]:
        for p in g.get("processes", []):
            (proc / str(p["pid"])).mkdir(parents=True, exist_ok=True)
            (proc / str(p["pid"]) / "cgroup").write_text("0::/user.slice/user-1000.slice/session-2.scope\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'spool_dir = "{tmp_path / "spool"}"\nproc_root = "{proc}"\nkubernetes = "{kubernetes}"\n'
        f'kubelet_socket = "{tmp_path / "kubelet.sock"}"\nlog_root = "{tmp_path / "log"}"\n'
    )
    return cfg


@pytest.mark.parametrize(
    ("kubernetes", "status", "says"),
    [
        ("auto", "SKIP", "no kubelet socket or pod log dirs here"),
        ("off", "SKIP", "kubernetes = off"),
        ("on", "FAIL", "kubelet.sock"),
    ],
)
def test_kubernetes_rows_follow_the_setting(tmp_path: Path, kubernetes: str, status: str, says: str) -> None:
    rows = _rows(_bare_metal(tmp_path, kubernetes), "default")
    assert rows["kubelet socket"][0] == status and says in rows["kubelet socket"][1]
    assert rows["log dirs"][0] == status
    assert rows["host PIDs visible"][0] == "OK"


def test_bare_metal_auto_doctor_exits_0(tmp_path: Path) -> None:
    proc = doctor("--simulate", "--config", str(_bare_metal(tmp_path, "auto")))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not any(r.startswith("FAIL") for r in proc.stdout.splitlines())


def test_no_gpu_processes_are_skip_not_ok(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'spool_dir = "{tmp_path / "spool"}"\n')
    rows = _rows(cfg, None)  # no driver here: no GPU, no processes
    assert rows["host PIDs visible"][0] == "SKIP"
    assert rows["GPU processes attributed"][0] == "SKIP"
