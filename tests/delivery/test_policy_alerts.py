"""Policies through the real agent into Debian's Alertmanager (API v2) and a webhook peer.

The agent runs ``policy-node`` every 0.5 s: GPU 0 is at 91 °C in cycles 2-7
(1.0-3.5 s after start), GPU 1 flaps (hot in cycles 1, 3 and 5 only).
Alertmanager's own ``alertmanager_alerts_received_total{status}`` tells what
reached it, firing or resolved.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.delivery.conftest import HttpPeer, ManagedServer, free_port, http_get, need, wait_until
from tests.policies.helpers import FLAPPY, HOT

ROOT = Path(__file__).resolve().parents[2]


def alertmanager(root: Path, port: int | None = None) -> ManagedServer:
    binary = need("prometheus-alertmanager")
    port = port or free_port()
    cfg = root / "alertmanager.yml"
    cfg.write_text('route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n')
    return ManagedServer(
        [
            binary,
            f"--config.file={cfg}",
            f"--storage.path={root / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        f"http://127.0.0.1:{port}/-/ready",
        f"http://127.0.0.1:{port}",
        root / "alertmanager.log",
    )


def active_alerts(am: ManagedServer) -> list[dict[str, Any]]:
    return list(json.loads(http_get(am.url + "/api/v2/alerts")))


def received(am: ManagedServer, status: str) -> float:
    text = http_get(am.url + "/metrics").decode()
    m = re.search(
        rf'^alertmanager_alerts_received_total\{{status="{status}",version="v2"\}} (\S+)$', text, re.M
    )
    return float(m.group(1)) if m else 0.0


@contextmanager
def agent(tmp_path: Path, policy: str) -> Iterator[subprocess.Popen[str]]:
    cfg = tmp_path / "falcon-gpu.toml"
    cfg.write_text(
        f'node = "policy-node"\nspool_dir = "{tmp_path / "spool"}"\ninterval = 0.5\n'
        '[[sinks]]\ntype = "stdout"\nformat = "json"\n' + policy
    )
    out = (tmp_path / "cycles.jsonl").open("w")  # one line per cycle: see cycles_out()
    proc = subprocess.Popen(
        [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "policy-node", "--config", str(cfg)],
        stdout=out,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        out.close()
        assert proc.returncode == 0, err


def cycles_out(tmp_path: Path) -> int:
    """Cycles the agent has finished (its stdout sink writes one JSON line per cycle)."""
    path = tmp_path / "cycles.jsonl"
    return path.read_text().count("\n") if path.exists() else 0


def policy(name: str, gpu: str, *, for_: float, hold_down: float, am: str = "", webhook: str = "") -> str:
    lines = [
        "[[policies]]",
        f'name = "{name}"',
        "temperature_above = 90",
        f'gpus = ["{gpu}"]',
        f"for = {for_}",
        f"hold_down = {hold_down}",
        'severity = "critical"',
    ]
    if am:
        lines.append(f'alertmanager = ["{am}"]')
    if webhook:
        lines.append(f'webhook = "{webhook}"')
    return "\n".join(lines) + "\n"


def test_fires_after_for_with_its_labels_and_resolves(tmp_path: Path) -> None:
    am = alertmanager(tmp_path)
    am.start()
    try:
        with agent(tmp_path, policy("GpuHot", "0", for_=0.5, hold_down=1, am=am.url)):
            wait_until(lambda: bool(active_alerts(am)), 15, "the alert in Alertmanager")
            (alert,) = active_alerts(am)
            assert alert["labels"] == {
                "alertname": "GpuHot",
                "policy": "GpuHot",
                "severity": "critical",
                "node": "policy-node",
                "gpu": "0",
                "uuid": HOT,
                "model": "NVIDIA H100 80GB HBM3",
                "namespace": "ml",
                "pod": "trainer-0",
            }
            assert alert["status"]["state"] == "active" and "91" in alert["annotations"]["summary"]
            wait_until(lambda: not active_alerts(am), 15, "the alert to resolve")
            assert received(am, "resolved") >= 1
    finally:
        am.stop()


def test_a_flapping_sensor_fires_once(tmp_path: Path, http_peer: HttpPeer) -> None:
    with agent(tmp_path, policy("Flap", "1", for_=0, hold_down=2, webhook=http_peer.url + "/hook")):
        wait_until(lambda: len(http_peer.requests) >= 2, 20, "the firing and the resolution")
        time.sleep(1.0)  # nothing more comes
    bodies = [json.loads(r.body) for r in http_peer.requests]
    assert [b["status"] for b in bodies] == ["firing", "resolved"]
    assert bodies[0]["labels"]["uuid"] == FLAPPY and bodies[1]["labels"] == bodies[0]["labels"]
    assert bodies[1]["startsAt"] == bodies[0]["startsAt"] and "endsAt" in bodies[1]


def test_alertmanager_down_while_firing_gets_the_alert_when_back(tmp_path: Path) -> None:
    port = free_port()
    am = alertmanager(tmp_path, port)
    with agent(tmp_path, policy("GpuHot", "0", for_=0.5, hold_down=60, am=f"http://127.0.0.1:{port}")):
        time.sleep(3.0)  # fired at about 1.5 s while nothing listens
        am.start()
        try:
            wait_until(lambda: bool(active_alerts(am)), 20, "the alert after Alertmanager came back")
            assert active_alerts(am)[0]["labels"]["uuid"] == HOT
        finally:
            am.stop()


def test_an_alert_that_cleared_while_alertmanager_was_down_arrives_resolved(tmp_path: Path) -> None:
    port = free_port()
    am = alertmanager(tmp_path, port)
    with agent(tmp_path, policy("GpuHot", "0", for_=0.5, hold_down=0.5, am=f"http://127.0.0.1:{port}")):
        # Fired at cycle 3 (91 °C from cycle 2, for 0.5 s), resolved at about cycle 9 (55 °C from cycle 8,
        # hold-down 0.5 s): counted in cycles, not seconds from launch, which a loaded machine stretches.
        wait_until(lambda: cycles_out(tmp_path) >= 12, 60, "12 cycles")
        am.start()
        try:
            wait_until(lambda: received(am, "resolved") >= 1, 20, "the resolution")
            assert received(am, "firing") == 0 and not active_alerts(am)
        finally:
            am.stop()
