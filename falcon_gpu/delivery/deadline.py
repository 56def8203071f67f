"""``timeout`` as a bound on one whole HTTP request, connect to last byte.

requests (urllib3, http.client) apply a timeout to each socket operation, so a
server that trickles one header line a second holds a request, and with it the
sink's whole backlog, for as long as it likes. Here every request runs under a
:class:`Deadline`: a timer that, when the request is still running at
``timeout``, shuts down the socket of the connection it uses. The blocked read
then fails at once, urllib3 discards that connection, and the transport reports
a timeout (retried like any other).

The connection is found through connection classes installed in the session's
adapters (:func:`mount`): each one tells the deadline of its thread's request
which socket it is using (a transport is used from one thread at a time).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

_current = threading.local()  # .deadline: the Deadline of the request this thread runs


class Deadline:
    """One request's deadline; ``expired`` is True once it cut the request off."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connections: list[HTTPConnection] = []
        self._done = False
        self.expired = False

    def attach(self, conn: HTTPConnection) -> None:
        with self._lock:
            if self._done:
                return
            if conn not in self._connections:
                self._connections.append(conn)
            if self.expired:  # connected after the deadline: cut it off as well
                _shutdown(conn)

    def expire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.expired = True
            for conn in self._connections:
                _shutdown(conn)

    def finish(self) -> None:
        with self._lock:
            self._done = True
            self._connections.clear()


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[Deadline]:
    """Run the requests of this block under one deadline ``seconds`` from now."""
    current = Deadline()
    timer = threading.Timer(seconds, current.expire)
    timer.daemon = True
    _current.deadline = current
    timer.start()
    try:
        yield current
    finally:
        timer.cancel()
        current.finish()
        _current.deadline = None


def _shutdown(conn: HTTPConnection) -> None:
    """Make a read blocked on ``conn`` fail now. For TLS the plain socket's shutdown is
    called (``SSLSocket.shutdown`` would also drop its SSL state under the reader)."""
    sock = conn.sock
    if not isinstance(sock, socket.socket):  # not connected yet (or a proxy's TLS-in-TLS: unused)
        return
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _attach(conn: HTTPConnection) -> None:
    current: Deadline | None = getattr(_current, "deadline", None)
    if current is not None:
        current.attach(conn)


class _Connection(HTTPConnection):
    """Tells the thread's deadline its socket: after connecting, and before each request
    (a kept-alive connection is not connected again)."""

    def connect(self) -> None:
        super().connect()
        _attach(self)

    def request(self, *args: Any, **kwargs: Any) -> None:
        _attach(self)
        super().request(*args, **kwargs)


class _TlsConnection(_Connection, HTTPSConnection):
    """The same for HTTPS (the MRO puts HTTPSConnection's connect under ours)."""


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _TlsPool(HTTPSConnectionPool):
    ConnectionCls = _TlsConnection


class _Adapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _Pool, "https": _TlsPool}


def mount(session: requests.Session) -> None:
    """Make every request of ``session`` tell its :func:`deadline` which socket it uses."""
    adapter = _Adapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
