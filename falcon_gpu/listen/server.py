"""The HTTP side of ``listen``: requests in front of :class:`LatestCycle`.

:class:`~falcon_gpu.listen.connections.ConnectionLoop` holds the connections (bounded, one
deadline per request, TLS handshakes); this module answers one request head at a time with the
standard library's request parser, behind the web configuration's basic authentication and
headers. The port is bound when the agent starts (:func:`open_listener`), and so is the web
configuration read, so a bad or taken address or a bad ``web_config_file`` exits 2 naming the
setting (and the key) before anything runs.
"""

from __future__ import annotations

import io
import logging
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from falcon_gpu import __version__
from falcon_gpu.listen import openmetrics
from falcon_gpu.listen.basic_auth import BasicAuth
from falcon_gpu.listen.connections import REQUEST_DEADLINE_S, Connection, ConnectionLoop
from falcon_gpu.listen.latest import Format, LatestCycle
from falcon_gpu.listen.live_config import LiveWebConfig, describe
from falcon_gpu.listen.web_config import WebConfig, WebConfigError
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import ConfigError, split_listen
from falcon_gpu.sinks.encoding import prom_text

log = logging.getLogger(__name__)

BACKLOG = 1024
"""Connections the kernel queues before they are accepted (capped by net.core.somaxconn): with 5,
most of 1,000 simultaneous scrapes had their SYN dropped and waited seconds for a retry."""
DEFAULT_MAX_CONNECTIONS = 64
WRITE_CHUNK = 65536
UNPROTECTED = ("/healthz", "/readyz")
LANDING_PAGE = (
    '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>falcon-gpu</title></head><body>\n'
    f"<h1>falcon-gpu {__version__}</h1>\n<p>NVIDIA GPU and per-pod GPU metrics.</p>\n<ul>\n"
    '<li><a href="/metrics">/metrics</a>: the latest cycle (Prometheus text or OpenMetrics)</li>\n'
    '<li><a href="/healthz">/healthz</a>: 200 while cycles run</li>\n'
    '<li><a href="/readyz">/readyz</a>: 200 once the first cycle is done</li>\n'
    "</ul>\n</body></html>\n"
).encode()
"""``GET /``: where a person who opens the port in a browser finds the endpoints."""
"""Answered without basic authentication: the kubelet's probes carry no credentials, and these
say only whether cycles run. TLS and client certificates apply to them as to /metrics."""


def wants_openmetrics(accept: str) -> bool:
    """True when the Accept header names OpenMetrics (Prometheus sends it first by default)."""
    return "application/openmetrics-text" in accept.lower()


def wants_gzip(accept_encoding: str) -> bool:
    for part in accept_encoding.lower().split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip() == "gzip":
            return params.replace(" ", "") not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


class _DeadlineSocketIO(io.RawIOBase):
    """Writes to a socket under one deadline for the whole answer (a socket timeout alone
    restarts with every chunk the client reads)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the client did not read the answer in time")
        self._sock.settimeout(left)
        return self._sock.send(memoryview(b)[:WRITE_CHUNK])


class Site:
    """What every request needs: the latest cycle, and the web configuration in force."""

    def __init__(self, latest: LatestCycle, web: LiveWebConfig | None) -> None:
        self.latest = latest
        self.web = web
        self.auth = BasicAuth()

    def config(self) -> WebConfig | None:
        return None if self.web is None else self.web.current()[0]


class _Exchange(BaseHTTPRequestHandler):
    """One request and its answer: the standard library's parser and writer, fed by the loop."""

    protocol_version = "HTTP/1.1"
    server_version = f"falcon-gpu/{__version__}"

    def __init__(self, conn: Connection, head: bytes, site: Site, deadline: float) -> None:
        self.site = site  # (no socketserver here: the loop read the head, this answers it)
        self.client_address = conn.address
        self.rfile = io.BytesIO(head)
        raw = _DeadlineSocketIO(conn.sock, time.monotonic() + deadline)
        self.wfile = io.BufferedWriter(raw, WRITE_CHUNK)
        self.close_connection = True
        self._web = site.config()

    def serve(self) -> bool:
        self.handle_one_request()
        self.wfile.flush()
        headers = getattr(self, "headers", None)  # absent when the request line was bad
        body_follows = headers is not None and (
            headers.get("Content-Length", "0").strip() not in ("", "0") or "Transfer-Encoding" in headers
        )
        return not self.close_connection and not body_follows  # a body is never read: close

    def version_string(self) -> str:
        """``Server: falcon-gpu/0.1.0``: the standard library's adds " Python/3.x" (or, without it, a
        trailing space)."""
        return self.server_version

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def end_headers(self) -> None:
        for name, value in self._web.headers if self._web is not None else ():
            self.send_header(name, value)
        super().end_headers()

    def _authorized(self, path: str) -> bool:
        users = self._web.users if self._web is not None else {}
        if not users or path in UNPROTECTED:
            return True
        return self.site.auth.allows(users, self.headers.get("Authorization", ""))

    def _answer(self, *, head: bool) -> None:
        path = self.path.split("?", 1)[0]
        latest = self.site.latest
        if not self._authorized(path):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="falcon-gpu"')
            body = b"Unauthorized\n"
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)
            return
        if path == "/metrics":
            self._metrics(latest, head=head)
        elif path == "/healthz":
            ok, why = latest.health()
            self._send(200 if ok else 503, why.encode(), "text/plain; charset=utf-8", head=head)
        elif path == "/readyz":
            ready = latest.ready()
            body = b"ready\n" if ready else b"no cycle has finished yet\n"
            self._send(200 if ready else 503, body, "text/plain; charset=utf-8", head=head)
        elif path == "/":
            self._send(200, LANDING_PAGE, "text/html; charset=utf-8", head=head)
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


class ListenServer:
    """Serves ``latest`` on a bound address from a background thread."""

    def __init__(
        self,
        listener: socket.socket,
        site: Site,
        *,
        max_connections: int,
        telemetry: Telemetry,
        request_deadline: float = REQUEST_DEADLINE_S,
    ) -> None:
        self._listener = listener
        self._site = site
        self._deadline = request_deadline
        self._loop = ConnectionLoop(
            listener,
            self._serve,
            max_connections=max_connections,
            wrap=self._wrap,
            is_tls=self._is_tls,
            generation=self._generation,
            telemetry=telemetry,
            request_deadline=request_deadline,
        )
        self._thread = threading.Thread(target=self._loop.run, name="falcon-gpu-listen", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._listener.getsockname()[:2]
        return str(host), int(port)

    @property
    def open_connections(self) -> int:
        return self._loop.open_connections

    def start(self) -> None:
        self._thread.start()
        web = self._site.web
        how = "plain HTTP" if web is None else describe(web.current()[0])
        log.info("serving /metrics, /healthz and /readyz on %s:%d (%s)", *self.address, how)

    def reload_web_config(self) -> bool:
        """Read ``web_config_file`` again now (SIGHUP); False when it is bad and the running one
        stays (logged and counted). It is also read again by itself when it changes."""
        return True if self._site.web is None else self._site.web.reload()

    def close(self) -> None:
        if self._thread.is_alive():
            self._loop.stop()
            self._thread.join(5)
        self._listener.close()

    def _serve(self, conn: Connection, head: bytes) -> bool:
        return _Exchange(conn, head, self._site, self._deadline).serve()

    def _context(self) -> ssl.SSLContext | None:
        return None if self._site.web is None else self._site.web.current()[1]

    def _is_tls(self) -> bool:
        return self._context() is not None

    def _generation(self) -> int:
        return 0 if self._site.web is None else self._site.web.generation

    def _wrap(self, sock: socket.socket) -> tuple[socket.socket, int]:
        # headers and body go out as two writes; with Nagle on, a keep-alive client's delayed ACK
        # would hold the body back 40 ms on every scrape after the first
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        context, generation = self._context(), self._generation()
        if context is None:
            return sock, generation
        return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), generation


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def open_listener(
    listen: str,
    latest: LatestCycle,
    *,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    web_config_file: Path | None = None,
    telemetry: Telemetry | None = None,
    request_deadline: float = REQUEST_DEADLINE_S,
) -> ListenServer:
    """Bind ``listen`` and read ``web_config_file`` now; ConfigError naming the setting (and the
    file's key) when either cannot be used."""
    telemetry = telemetry or Telemetry()
    try:
        host, port = split_listen(listen)
    except ValueError as exc:
        raise ConfigError(f"setting 'listen': {exc}") from None
    web = None
    if web_config_file is not None:
        try:
            web = LiveWebConfig(web_config_file, telemetry)
        except WebConfigError as exc:
            raise ConfigError(f"setting 'web_config_file': {web_config_file}: {exc}") from None
    try:
        listener = _bind(host, port)
    except OSError as exc:  # taken port, unknown host, address not on this machine
        raise ConfigError(f"setting 'listen': cannot listen on {listen!r}: {exc.strerror or exc}") from None
    return ListenServer(
        listener,
        Site(latest, web),
        max_connections=max_connections,
        telemetry=telemetry,
        request_deadline=request_deadline,
    )
