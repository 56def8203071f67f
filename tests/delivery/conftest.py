"""Fixtures that start real servers on free loopback ports and stop them.

Prometheus (remote-write receiver on), VictoriaMetrics and the Pushgateway are
the Debian binaries; a test that needs one is skipped, with the reason, only
when the binary is missing (CI installs them). Open-Falcon transfer is a Go
program built here from ``transfer_server.go`` (standard library only);
falcon-agent and Nightingale are small Python HTTP servers (:class:`HttpPeer`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.model.samples import FalconItem, Family, PromBatch, PromGroup, Series
from falcon_gpu.model.telemetry import Telemetry

HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def need(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        pytest.skip(f"{binary} is not installed (scripts/test.sh installs it from Debian)")
    return path


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return bytes(resp.read())


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class ManagedServer:
    """A server process that can be stopped and started again on the same port and data."""

    def __init__(self, argv: list[str], ready_url: str, base_url: str, log: Path) -> None:
        self.argv, self.ready_url, self.url, self._log = argv, ready_url, base_url, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        fh = self._log.open("ab")
        self.proc = subprocess.Popen(self.argv, stdout=fh, stderr=subprocess.STDOUT)
        fh.close()

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.argv[0]} exited: {self._log.read_text()[-2000:]}")
            try:
                http_get(self.ready_url, timeout=1)
                return True
            except (OSError, urllib.error.URLError):
                return False

        wait_until(ready, 30, f"{self.argv[0]} to be ready")
        time.sleep(0.2)  # a second server on a taken port fails to bind after answering nothing
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.argv[0]} exited: {self._log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def start_prometheus(root: Path) -> ManagedServer:
    binary = need("prometheus")
    port = free_port()
    cfg = root / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 15s\n")
    server = ManagedServer(
        [
            binary,
            f"--config.file={cfg}",
            f"--storage.tsdb.path={root / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-remote-write-receiver",
        ],
        f"http://127.0.0.1:{port}/-/ready",
        f"http://127.0.0.1:{port}",
        root / "prometheus.log",
    )
    server.start()
    return server


def start_victoria(root: Path) -> ManagedServer:
    binary = need("victoria-metrics")
    port = free_port()
    server = ManagedServer(
        [
            binary,
            f"-httpListenAddr=127.0.0.1:{port}",
            f"-storageDataPath={root / 'vm'}",
            "-search.latencyOffset=0s",
            "-search.disableCache",
            "-retentionPeriod=100y",
        ],
        f"http://127.0.0.1:{port}/health",
        f"http://127.0.0.1:{port}",
        root / "vm.log",
    )
    server.start()
    return server


def start_pushgateway(root: Path) -> ManagedServer:
    binary = need("prometheus-pushgateway")
    port = free_port()
    # Debian's build persists to /var/lib/prometheus by default: keep every test's groups to itself
    server = ManagedServer(
        [binary, f"--web.listen-address=127.0.0.1:{port}", "--persistence.file="],
        f"http://127.0.0.1:{port}/-/ready",
        f"http://127.0.0.1:{port}",
        root / "pushgateway.log",
    )
    server.start()
    return server


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[ManagedServer]:
    server = start_prometheus(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def victoria(tmp_path: Path) -> Iterator[ManagedServer]:
    server = start_victoria(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def pushgateway(tmp_path: Path) -> Iterator[ManagedServer]:
    server = start_pushgateway(tmp_path)
    yield server
    server.stop()


def prom_query(server: ManagedServer, query: str, at: int | None = None) -> list[dict[str, Any]]:
    """``/api/v1/query`` result list (instant query at now, or at ``at`` ms)."""
    params = {"query": query} if at is None else {"query": query, "time": f"{at / 1000:.3f}"}
    url = f"{server.url}/api/v1/query?" + urllib.parse.urlencode(params)
    answer = json.loads(http_get(url))
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


# -- Open-Falcon transfer (Go) ---------------------------------------------------
@pytest.fixture(scope="session")
def transfer_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = need("go")
    root = tmp_path_factory.mktemp("gobuild")
    env = {
        **os.environ,
        "GOCACHE": str(root / "cache"),
        "GOPATH": str(root / "path"),
        "GOFLAGS": "-mod=mod",
        "GO111MODULE": "off",
        "CGO_ENABLED": "0",
    }
    out = root / "transfer"
    subprocess.run(
        [go, "build", "-o", str(out), str(HERE / "transfer_server.go")],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


@dataclass
class TransferServer:
    binary: Path
    received: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    idle_close: float | None = None  # seconds after which the peer closes an idle connection

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        idle = [] if self.idle_close is None else [str(self.idle_close)]
        self.proc = subprocess.Popen(
            [str(self.binary), self.address, str(self.received), *idle], stdout=subprocess.PIPE
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == b"listening"

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def items(self) -> list[dict[str, Any]]:
        if not self.received.exists():
            return []
        return [json.loads(line) for line in self.received.read_text().splitlines()]


@pytest.fixture
def transfer(transfer_binary: Path, tmp_path: Path) -> Iterator[TransferServer]:
    server = TransferServer(transfer_binary, tmp_path / "transfer-received.jsonl")
    server.start()
    yield server
    server.stop()


# -- programmable HTTP peer (falcon-agent, Nightingale, failure answers, TLS) ------
@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


Answer = tuple[int, dict[str, str], bytes]


class HttpPeer:
    """A loopback HTTP(S) server that records every request and answers from a script:
    queued answers first, then ``respond(request)`` when set, then ``default``."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[Request] = []
        self.answers: deque[Answer] = deque()
        self.default: Answer = (200, {}, b"success")
        self.respond: Callable[[Request], Answer] | None = None
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = Request(self.command, self.path, dict(self.headers.items()), body, time.monotonic())
                peer.requests.append(request)
                if peer.answers:
                    status, headers, payload = peer.answers.popleft()
                elif peer.respond is not None:
                    status, headers, payload = peer.respond(request)
                else:
                    status, headers, payload = peer.default
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_POST = do_PUT = do_DELETE = do_GET = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def http_peer() -> Iterator[HttpPeer]:
    peer = HttpPeer()
    yield peer
    peer.close()


# -- feeding sinks directly ----------------------------------------------------------
@dataclass(frozen=True)
class FakeRendered:
    prometheus: PromBatch
    falcon: tuple[FalconItem, ...] = ()
    job_groups: tuple[PromGroup, ...] = ()


def prom_cycle(ts_ms: int, value: float, *, node: str = "node-a", gpus: int = 2) -> FakeRendered:
    """One cycle: a utilisation gauge per GPU (value + gpu index) and an energy counter."""
    util = Family(
        "falcon_gpu_utilization_ratio",
        "gauge",
        "GPU busy ratio",
        tuple(
            Series((("node", node), ("gpu", str(g)), ("uuid", f"GPU-{g}")), value + g) for g in range(gpus)
        ),
    )
    energy = Family(
        "falcon_gpu_energy_joules_total",
        "counter",
        "energy",
        tuple(
            Series((("node", node), ("gpu", str(g)), ("uuid", f"GPU-{g}")), 1000.0 * value)
            for g in range(gpus)
        ),
    )
    return FakeRendered(PromBatch(ts_ms, (util, energy)))


def falcon_cycle(ts: int, value: float, *, n: int = 3) -> FakeRendered:
    items = tuple(
        FalconItem("node-a", "GPUUtils", ts, 15, value + i, "GAUGE", f"GpuId={i}") for i in range(n)
    )
    return FakeRendered(PromBatch(ts * 1000, ()), items)


@pytest.fixture
def telemetry() -> Telemetry:
    return Telemetry()


def outcomes(telemetry: Telemetry, sink: str) -> dict[str, int]:
    view = telemetry.view()
    return {o: view.samples_total.get((sink, o), 0) for o in ("sent", "spooled", "dropped")}
