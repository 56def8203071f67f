"""The HTTP side of ``listen``: a threaded server in front of :class:`LatestCycle`.

Each request gets its own daemon thread and a socket timeout, so a client that
connects and sends nothing, or stops reading, costs one idle thread until the
timeout and never delays a cycle or another scraper. The port is bound when
the agent starts (:func:`open_listener`), so a bad or taken address exits 2
naming ``listen`` before anything runs.
"""

from __future__ import annotations

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from falcon_gpu.listen import openmetrics
from falcon_gpu.listen.latest import Format, LatestCycle
from falcon_gpu.settings import ConfigError, split_listen
from falcon_gpu.sinks.encoding import prom_text

log = logging.getLogger(__name__)

CLIENT_TIMEOUT_S = 10.0
"""Seconds a client may take to send its request or read the answer."""


def wants_openmetrics(accept: str) -> bool:
    """True when the Accept header names OpenMetrics (Prometheus sends it first by default)."""
    return "application/openmetrics-text" in accept.lower()


def wants_gzip(accept_encoding: str) -> bool:
    for part in accept_encoding.lower().split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip() == "gzip":
            return params.replace(" ", "") not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = CLIENT_TIMEOUT_S
    # headers and body go out as two writes; with Nagle on, a keep-alive client's delayed ACK
    # would hold the body back 40 ms on every scrape after the first
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    server_version = "falcon-gpu"
    sys_version = ""

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _answer(self, *, head: bool) -> None:
        path = self.path.split("?", 1)[0]
        latest = self.server.latest
        if path == "/metrics":
            self._metrics(latest, head=head)
        elif path == "/healthz":
            ok, why = latest.health()
            self._send(200 if ok else 503, why.encode(), "text/plain; charset=utf-8", head=head)
        elif path == "/readyz":
            ready = latest.ready()
            body = b"ready\n" if ready else b"no cycle has finished yet\n"
            self._send(200 if ready else 503, body, "text/plain; charset=utf-8", head=head)
        else:
            self._send(404, b"not found: try /metrics, /healthz or /readyz\n", "text/plain", head=head)

    def _metrics(self, latest: LatestCycle, *, head: bool) -> None:
        fmt: Format = "openmetrics" if wants_openmetrics(self.headers.get("Accept", "")) else "text"
        gzipped = wants_gzip(self.headers.get("Accept-Encoding", ""))
        body = latest.body(fmt, gzipped=gzipped)
        if body is None:
            self._send(503, b"no cycle has finished yet\n", "text/plain; charset=utf-8", head=head)
            return
        ctype = openmetrics.CONTENT_TYPE if fmt == "openmetrics" else prom_text.CONTENT_TYPE
        self._send(200, body, ctype, head=head, encoding="gzip" if gzipped else None)

    def _send(self, code: int, body: bytes, ctype: str, *, head: bool, encoding: str | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Vary", "Accept, Accept-Encoding")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("listen: %s %s", self.address_string(), format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stuck client never keeps the agent from exiting
    latest: LatestCycle

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that hangs up or times out is routine for a metrics endpoint
        log.debug("listen: request from %s failed", client_address, exc_info=True)


class _Server6(_Server):
    address_family = socket.AF_INET6


class ListenServer:
    """Serves ``latest`` on a bound address from a background thread."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="falcon-gpu-listen", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread.start()
        log.info("serving /metrics, /healthz and /readyz on %s:%d", *self.address)

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


def open_listener(listen: str, latest: LatestCycle) -> ListenServer:
    """Bind ``listen`` now; ConfigError naming the setting when it cannot be bound."""
    try:
        host, port = split_listen(listen)
    except ValueError as exc:
        raise ConfigError(f"setting 'listen': {exc}") from None
    cls = _Server6 if ":" in host else _Server
    try:
        server = cls((host, port), _Handler)
    except OSError as exc:  # taken port, unknown host, address not on this machine
        raise ConfigError(f"setting 'listen': cannot listen on {listen!r}: {exc.strerror or exc}") from None
    server.latest = latest
    return ListenServer(server)
