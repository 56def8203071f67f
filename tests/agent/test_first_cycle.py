"""The first cycle after a start is attributed like every other (CONTRACT section 3).

Run through the real CLI on the shared-GPU scenario: the simulated host's
PodResources gRPC server, log dirs and proc tree, the background refresher and
the scheduled loop. Without the wait, the loop's first cycle races the
refresher's first kubelet List and ships every process unattributed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from falcon_gpu.attribution.refresher import Refresher

from .test_cli_e2e import cli, parse_prom

ROOT = Path(__file__).resolve().parents[2]
SHARED = "GPU-fe49fb4c-3d29-111a-1278-513e4ab0ce96"
GIB = 1 << 30


def _expect_pods(text: str) -> None:
    series = parse_prom(text)
    pods = {dict(lb)["pod"] for (name, lb), _ in series.items() if name == "falcon_gpu_pod_info"}
    assert pods == {
        "jupyter-alice",
        "jupyter-bob",
        "dashboard-render-6f7c9",
        "pipeline-0",
        "idle-reservation-0",
    }
    unattributed = {
        dict(lb)["uuid"]: v
        for (name, lb), v in series.items()
        if name == "falcon_gpu_unattributed_memory_used_bytes"
    }
    # device 14 GiB - the three pods' 9 GiB: not the whole device, as before the first attribution
    assert unattributed[SHARED] == 14 * GIB - 9 * GIB


def _first_cycle_of_the_loop(cfg: Path) -> str:
    """Start ``falcon-gpu run`` (the scheduled loop), read its first cycle, stop it with SIGTERM."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "shared-gpu", "--config", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    lines: list[str] = []
    watchdog = threading.Timer(60, proc.kill)  # a loop that never prints must not hang the suite
    watchdog.start()
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("falcon_gpu_agent_cycles_total"):
                break
        else:
            pytest.fail("the loop printed no whole cycle")
    finally:
        watchdog.cancel()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return "".join(lines)


def test_the_loops_first_cycle_carries_pod_labels(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'node = "sim-node"\ninterval = 30\nspool_dir = "{tmp_path / "spool"}"\n')
    _expect_pods(_first_cycle_of_the_loop(cfg))


def test_run_once_carries_pod_labels(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'node = "sim-node"\nspool_dir = "{tmp_path / "spool"}"\n')
    proc = cli("run", "--simulate", "shared-gpu", "--once", "--config", str(cfg))
    assert proc.returncode == 0, proc.stderr
    _expect_pods(proc.stdout)


def test_the_wait_for_the_first_round_is_bounded() -> None:
    """A lookup that hangs (a kubelet that does not answer) holds the first cycle back only so long."""
    refresher = Refresher(name="test-refresher")
    release = threading.Event()
    ran: list[str] = []
    refresher.add("fast", lambda: ran.append("fast"), period=60, min_gap=1)
    refresher.add("hung", lambda: (release.wait(10), ran.append("hung")), period=60, min_gap=1)
    refresher.start()
    try:
        started = time.monotonic()
        assert refresher.wait_first_round(0.3) is False
        assert 0.25 < time.monotonic() - started < 2.0
        release.set()
        assert refresher.wait_first_round(5.0) is True
        assert sorted(ran) == ["fast", "hung"]
    finally:
        release.set()
        refresher.stop()


def test_nothing_to_refresh_means_nothing_to_wait_for() -> None:
    started = time.monotonic()
    assert Refresher(name="empty").wait_first_round(5.0) is True
    assert time.monotonic() - started < 0.5
