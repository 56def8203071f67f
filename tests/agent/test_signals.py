"""Issue 19, item 6: the agent's signals, sent to a real process.

- SIGHUP reloads the configuration (a bad file keeps the running one, logged); the ``listen``
  socket stays on its port and a sink's spool stays: the backlog spooled against a server that
  was down before the reload reaches Prometheus after it.
- SIGTERM and SIGINT shut down within the sink's ``timeout`` + 2 s although the receiver accepts
  and never answers; a second SIGINT exits at once.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.delivery.conftest import ManagedServer, free_port, prom_query, wait_until
from tests.delivery.conftest import prometheus as prometheus  # the fixture

ROOT = Path(__file__).resolve().parents[2]


class HangingReceiver:
    """A loopback socket that accepts every connection, reads what comes and never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/api/v1/write"
        self.accepted = 0
        self._held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._held.append(conn)
            self.accepted += 1

    def close(self) -> None:
        self.sock.close()
        for conn in self._held:
            conn.close()


@pytest.fixture
def hanging() -> Iterator[HangingReceiver]:
    receiver = HangingReceiver()
    yield receiver
    receiver.close()


def write(path: Path, *, listen: str, url: str, labels: str, extra: str = "") -> None:
    path.write_text(
        f'node = "signal-node"\ninterval = 1\nlisten = "{listen}"\nspool_dir = "{path.parent / "spool"}"\n'
        f'labels = {{{labels}}}\n[[sinks]]\ntype = "remote_write"\nurl = "{url}"\n'
        f"retry_max_delay = 0.5\n{extra}"
    )


def start(config: Path, log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "--config", str(config)]
    with log.open("wb") as fh:
        return subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)


def metrics(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            return bytes(resp.read()).decode()
    except OSError:
        return ""


def cycles(port: int) -> float:
    for line in metrics(port).splitlines():
        if line.startswith("falcon_gpu_agent_cycles_total"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.servers
def test_sighup_reloads_keeps_a_bad_file_out_and_the_socket_and_spool_stay(
    prometheus: ManagedServer, tmp_path: Path
) -> None:
    port = free_port()
    listen = f"127.0.0.1:{port}"
    config = tmp_path / "falcon-gpu.toml"
    down = f"http://127.0.0.1:{free_port()}/api/v1/write"
    write(config, listen=listen, url=down, labels='conf = "one"')
    log = tmp_path / "agent.log"
    proc = start(config, log)
    try:
        wait_until(lambda: cycles(port) >= 3, 60, "three cycles spooled against a server that is down")
        assert 'conf="one"' in metrics(port)

        config.write_text(config.read_text() + "interval = [\n")  # not TOML
        proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "does not load" in log.read_text(), 30, "the bad file refused")
        before = cycles(port)
        wait_until(lambda: cycles(port) >= before + 2, 30, "cycles going on after the refused reload")
        assert proc.poll() is None and 'conf="one"' in metrics(port)

        write(config, listen=listen, url=prometheus.url + "/api/v1/write", labels='conf = "two"')
        proc.send_signal(signal.SIGHUP)
        wait_until(lambda: 'conf="two"' in metrics(port), 30, f"the new labels on the same port: {log}")

        def confs() -> set[str]:
            found = prom_query(prometheus, "falcon_gpu_agent_cycles_total[10m]")
            return {r["metric"]["conf"] for r in found}

        wait_until(lambda: confs() == {"one", "two"}, 60, "the spooled backlog and new cycles in Prometheus")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    text = log.read_text()
    assert code == 0, text
    assert text.count("does not load") == 1 and "configuration reloaded" in text, text


def hung_agent(tmp_path: Path, hanging: HangingReceiver, timeout: float) -> subprocess.Popen[bytes]:
    """An agent whose only sink's receiver has accepted a request and will never answer it."""
    config = tmp_path / "falcon-gpu.toml"
    # a quick first retry: the old shutdown then also waited out the retry's request (2 x timeout)
    extra = f"timeout = {timeout}\nretry_initial_delay = 0.01\n"
    write(config, listen=f"127.0.0.1:{free_port()}", url=hanging.url, labels="", extra=extra)
    proc = start(config, tmp_path / "agent.log")
    wait_until(lambda: hanging.accepted >= 1, 60, "a request in flight to the hanging receiver")
    time.sleep(0.5)
    return proc


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_shuts_down_within_timeout_plus_2s_despite_a_hanging_receiver(
    tmp_path: Path, hanging: HangingReceiver, signum: int
) -> None:
    timeout = 5.0
    proc = hung_agent(tmp_path, hanging, timeout)
    started = time.monotonic()
    os.kill(proc.pid, signum)
    try:
        code = proc.wait(60)
    finally:
        took = time.monotonic() - started
    text = (tmp_path / "agent.log").read_text()
    assert code == 0, text
    assert took <= timeout + 2, (took, text)
    assert f"received {signal.Signals(signum).name}" in text, text


def test_a_second_sigint_exits_at_once(tmp_path: Path, hanging: HangingReceiver) -> None:
    proc = hung_agent(tmp_path, hanging, 10.0)
    os.kill(proc.pid, signal.SIGINT)
    time.sleep(0.5)
    started = time.monotonic()
    os.kill(proc.pid, signal.SIGINT)
    code = proc.wait(60)
    took = time.monotonic() - started
    text = (tmp_path / "agent.log").read_text()
    assert code == 130 and took < 2, (code, took, text)
    assert "second SIGINT" in text, text
