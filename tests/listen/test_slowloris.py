"""Issue 19.3: 1,000 slowloris connections against the real agent under ``ulimit -n 1024``.

The agent runs as under systemd's default ``LimitNOFILE=1024``, with a remote_write sink into the
real Prometheus. 1,000 connections each send a request line and then a header byte now and then,
never finishing (and come back when dropped, as slowloris does), while a well-behaved client
scrapes once a second. Every scrape must be answered within 1 s; the agent's descriptors, threads
and RSS stay bounded; cycles run on time, attribution still reads the pod log dirs, and the sink
keeps delivering. Before the limit, each connection held a thread and a descriptor and a socket
timeout restarted with every byte: descriptors ran out and scrapes went unanswered.
"""

from __future__ import annotations

import contextlib
import json
import re
import resource
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.delivery.conftest import free_port, http_get, prom_query, start_prometheus, wait_until

ROOT = Path(__file__).resolve().parents[2]
ATTACKERS = 1000
ATTACK_S = 14.0  # past the 10 s request deadline: dropped connections come back
SCRAPE_BUDGET_S = 1.0


def _limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


def _status(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "Threads"):
            fields[key] = int(value.split()[0])
    fields["fds"] = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    return fields


def _value(body: str, name: str, labels: str = "") -> float:
    pattern = rf"^{re.escape(name)}\{{[^}}]*{re.escape(labels)}[^}}]*\}} (\S+)$"
    found = re.search(pattern, body, re.M)
    return float(found[1]) if found else 0.0


class Slowloris:
    """Holds ``count`` connections open, each trickling header bytes and never finishing."""

    def __init__(self, port: int, count: int) -> None:
        self.port, self.count = port, count
        self.stop = threading.Event()
        self.connected = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Slowloris:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(10)

    def _open(self, sel: selectors.DefaultSelector) -> None:
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", self.port))
        sel.register(s, selectors.EVENT_READ)
        self._pending.append(s)

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        self._pending: list[socket.socket] = []
        live: list[socket.socket] = []
        for _ in range(self.count):
            self._open(sel)
        next_trickle = time.monotonic() + 1.0
        while not self.stop.is_set():
            for key, _ in sel.select(0.2):  # readable: the agent closed it (or answered, never)
                s = key.fileobj
                assert isinstance(s, socket.socket)
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(s)
                    s.close()
                    self.dropped += 1
                    if s in live:
                        live.remove(s)
                    if s in self._pending:
                        self._pending.remove(s)
            for s in list(self._pending):  # connected: start the request, never finish it
                try:
                    s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                except (BlockingIOError, OSError):
                    continue
                self._pending.remove(s)
                live.append(s)
                self.connected += 1
            now = time.monotonic()
            if now >= next_trickle:
                next_trickle = now + 1.0
                for s in live:
                    with contextlib.suppress(OSError):
                        s.send(b"X")  # one header byte a second: a per-byte timeout never fires
                for _ in range(self.count - len(live) - len(self._pending)):  # come back
                    self._open(sel)
        for key in list(sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        sel.close()


@pytest.mark.servers
def test_slowloris_under_ulimit_1024_leaves_scrapes_cycles_and_sinks_alone(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < ATTACKERS + 200:
        pytest.skip(f"this test process may open only {hard} descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, ATTACKERS + 200), hard))
    prometheus = start_prometheus(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    sinks = [{"type": "remote_write", "url": f"{prometheus.url}/api/v1/write", "batch_max_age": 0.5}]
    env = {"FALCON_GPU_LISTEN": f"127.0.0.1:{port}", "FALCON_GPU_NODE": "slowloris-node",
           "FALCON_GPU_SPOOL_DIR": str(tmp_path / "spool"), "FALCON_GPU_JOBS_DIR": str(tmp_path / "jobs"),
           "FALCON_GPU_SINKS": json.dumps(sinks),
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    argv = [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "shared-gpu", "--interval", "0.5"]
    with (tmp_path / "agent.log").open("wb") as log:
        agent = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env, preexec_fn=_limit_descriptors
        )
    try:
        wait_until(lambda: _ready(url, agent), 30, "the agent's /readyz")
        body = http_get(url + "/metrics").decode()
        wait_until(lambda: _value(http_get(url + "/metrics").decode(), "falcon_gpu_agent_samples_total",
                                  'outcome="sent"') > 0, 20, "the first delivery")  # fmt: skip
        before = _status(agent.pid)
        scrapes: list[float] = []
        peak = dict(before)
        with Slowloris(port, ATTACKERS) as attack:
            wait_until(lambda: attack.connected >= ATTACKERS, 20, "1,000 slowloris connections")
            started = time.monotonic()
            body = http_get(url + "/metrics").decode()
            cycles0 = _value(body, "falcon_gpu_agent_cycles_total")
            sent0 = _value(body, "falcon_gpu_agent_samples_total", 'outcome="sent"')
            while time.monotonic() - started < ATTACK_S:
                t0 = time.monotonic()
                with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
                    assert resp.status == 200
                    body = resp.read().decode()
                scrapes.append(time.monotonic() - t0)
                assert 'pod="jupyter-alice"' in body  # the pod log dirs are still read
                for key, value in _status(agent.pid).items():
                    peak[key] = max(peak[key], value)
                time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
            elapsed = time.monotonic() - started
            cycles = _value(body, "falcon_gpu_agent_cycles_total") - cycles0
            sent = _value(body, "falcon_gpu_agent_samples_total", 'outcome="sent"') - sent0
            assert attack.dropped > 0  # the agent made room (else this test attacked nothing)
        assert agent.poll() is None
        assert len(scrapes) >= ATTACK_S - 2 and max(scrapes) < SCRAPE_BUDGET_S, scrapes
        assert peak["fds"] <= before["fds"] + 64 + 8, (before, peak)  # listen_max_connections = 64
        assert peak["Threads"] <= before["Threads"] + 64 + 2, (before, peak)
        assert peak["VmRSS"] <= before["VmRSS"] + 40 * 1024, (before, peak)  # KiB
        assert cycles >= 0.8 * elapsed / 0.5 - 2, cycles  # every cycle on time
        assert sent > 0 and _value(body, "falcon_gpu_agent_samples_total", 'outcome="dropped"') == 0
        errors = {k for k in re.findall(r'falcon_gpu_agent_errors_total\{[^}]*kind="([^"]+)"', body)}
        log_tail = (tmp_path / "agent.log").read_text()[-3000:]
        assert errors <= {"listen_connections"}, (errors, log_tail)  # no logs, spool or sink error
        # and the data reached the store
        wait_until(lambda: bool(prom_query(prometheus, 'falcon_gpu_pod_info{node="slowloris-node"}')), 20,
                   "pods in Prometheus")  # fmt: skip
    finally:
        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(30)
        finally:
            prometheus.stop()


def _ready(url: str, agent: subprocess.Popen[bytes]) -> bool:
    assert agent.poll() is None, "the agent exited"
    try:
        return http_get(url + "/readyz", timeout=1) == b"ready\n"
    except OSError:
        return False
