"""Connections of ``listen``: a bounded set, read by one thread, answered by a bounded pool.

A thread per connection let 995 slowloris clients take 1,012 threads and every descriptor the
agent had (systemd's ``LimitNOFILE=1024``), and a socket timeout that restarts with every byte let
each of them stay forever. Here one selector thread accepts and reads every request head (and does
every TLS handshake) without blocking, so a connection that sends slowly or nothing costs a
descriptor and no thread; a complete head goes to a worker thread, which answers it under its own
deadline. The whole wait for a request (idle keep-alive, handshake, head) has one deadline, not a
timeout per byte, and at most ``max_connections`` connections are open at once: past it, the
connection that has waited longest for its request is dropped to make room (a scraper sends its
request at once, an attacker never finishes his), and when every connection is being answered the
newcomer is refused at once (503 in plain HTTP, a close under TLS).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import selectors
import socket
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable

from falcon_gpu.listen.workers import Workers
from falcon_gpu.model.telemetry import Telemetry

log = logging.getLogger(__name__)

REQUEST_DEADLINE_S = 10.0
"""Seconds from the start of the wait for a request (connect, or the end of the previous answer)
to its last header line, handshake included; and again for writing the answer."""
MAX_HEAD_BYTES = 65536
STUCK_S = 1.0
EVICT_AFTER_S = 0.1
"""A connection opened this recently that has sent nothing yet is not dropped to make room: a
scraper's request is on its way one round trip after the connect. One that sent part of a request
and stopped is dropped at once."""
PAUSE_POLL_S = 0.05
ACCEPTS_PER_WAKE = 32
"""Accepted before the heads already waiting are read: a burst of connects never crowds out
a scraper whose request is in."""
_REFUSED_BODY = b"too many connections (listen_max_connections), try again\n"
REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
    + f"Content-Length: {len(_REFUSED_BODY)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n".encode()
    + _REFUSED_BODY
)
TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class Connection:
    """One client: its socket (TLS-wrapped when the web configuration says so) and its request."""

    __slots__ = ("address", "buffer", "deadline", "generation", "handshaking", "reused", "sock")

    def __init__(
        self, sock: socket.socket, address: tuple[str, int], *, handshaking: bool, generation: int
    ) -> None:
        self.sock = sock
        self.generation = generation
        """The web configuration it was set up under: a connection outlives no change of it."""
        self.address = address
        self.buffer = bytearray()
        self.handshaking = handshaking
        self.reused = False
        self.deadline = 0.0

    def head(self) -> bytes | None:
        """The complete request head, taken off the buffer (what follows stays); None until whole."""
        end = self.buffer.find(b"\r\n\r\n")
        size = 4
        if end < 0:
            end, size = self.buffer.find(b"\n\n"), 2
        if end < 0:
            return None
        head = bytes(self.buffer[: end + size])
        del self.buffer[: end + size]
        return head

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


Serve = Callable[[Connection, bytes], bool]
"""Answers one request head on a blocking socket (under its own deadline of the same length);
True to keep the connection for another."""
Wrap = Callable[[socket.socket], tuple[socket.socket, int]]
"""Wraps an accepted socket for TLS (not yet handshaken), or returns it as it is; with the
generation of the web configuration that decided."""


class ConnectionLoop:
    def __init__(
        self,
        listener: socket.socket,
        serve: Serve,
        *,
        max_connections: int,
        wrap: Wrap,
        is_tls: Callable[[], bool],
        generation: Callable[[], int],
        telemetry: Telemetry,
        request_deadline: float = REQUEST_DEADLINE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._listener = listener
        self._deadline = request_deadline
        self._serve = serve
        self._max = max_connections
        self._wrap = wrap
        self._is_tls = is_tls
        self._generation = generation
        self._telemetry = telemetry
        self._clock = clock
        self._selector = selectors.DefaultSelector()
        self._waiting: OrderedDict[Connection, None] = OrderedDict()  # oldest wait first
        self._answering: dict[Connection, float] = {}  # → when its answer started
        self._accepting = True
        self._accept_again_at = 0.0
        self._done: queue.SimpleQueue[tuple[Connection, bool]] = queue.SimpleQueue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_w.setblocking(False)
        self._stopping = False
        self._workers: Workers[Connection] = Workers(max_connections, self._answer)

    # -- the selector thread -------------------------------------------------
    def run(self) -> None:
        self._listener.setblocking(False)
        self._wake_r.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        try:
            while not self._stopping:
                for key, _ in self._selector.select(self._next_timeout()):
                    if key.fileobj is self._listener:
                        self._accept()
                    elif key.fileobj is self._wake_r:
                        self._drain_wake()
                    else:
                        self._readable(key.data)
                self._take_back()
                self._expire()
                self._resume()
        finally:
            self._close_all()

    def stop(self) -> None:
        self._stopping = True
        self._wake()

    def _next_timeout(self) -> float | None:
        if not self._accepting:
            return PAUSE_POLL_S  # until a slot frees (a wake) or the answers in progress are stuck
        for conn in self._waiting:
            return max(0.0, conn.deadline - self._clock())
        return None

    def _full(self) -> bool:
        return len(self._waiting) + len(self._answering) >= self._max

    def _stuck(self) -> bool:
        """Every slot is being answered, and the oldest answer has taken over STUCK_S (a client
        that does not read): newcomers are refused at once rather than left in the backlog."""
        oldest = min(self._answering.values(), default=self._clock())
        return self._clock() - oldest > STUCK_S

    def _pause(self, paused: bool) -> None:
        if paused == (not self._accepting):
            return
        self._accepting = not paused
        if paused:
            self._selector.unregister(self._listener)
        else:
            self._selector.register(self._listener, selectors.EVENT_READ)

    def _evictable(self) -> Connection | None:
        """The connection that has waited longest among those that may go: it sent part of a
        request and not the rest (slowloris), or it has had EVICT_AFTER_S and sent nothing."""
        opened_before = self._clock() + self._deadline - EVICT_AFTER_S
        for conn in self._waiting:
            if conn.buffer or conn.reused or conn.deadline <= opened_before:
                return conn
        return None

    def _may_accept(self) -> bool:
        if self._clock() < self._accept_again_at:
            return False
        if not self._full():
            return True
        return self._evictable() is not None or (not self._waiting and self._stuck())

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_WAKE):
            if not self._may_accept():
                # the slots are in quick answers or were just opened: the rest wait in the
                # kernel's backlog (no descriptor, no thread of ours) for a moment
                self._pause(True)
                return
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE & co.: the kernel keeps the rest in the backlog
                self._telemetry.failing("listen_accept", "listen_accept", f"listen: cannot accept: {exc}")
                self._accept_again_at = self._clock() + PAUSE_POLL_S  # not a busy loop meanwhile
                self._pause(True)
                return
            self._telemetry.recovered("listen_accept", "listen: accepting connections again")
            self._admit(sock, address)

    def _resume(self) -> None:
        if not self._accepting and self._may_accept():
            self._pause(False)

    def _admit(self, sock: socket.socket, address: tuple[str, int]) -> None:
        if self._full():
            victim = self._evictable()
            if victim is None:
                self._refuse(sock)
                return
            self._drop(victim)
            self._telemetry.failing(
                "listen_full", "listen_connections",
                f"listen: {self._max} connections open (listen_max_connections); dropping the ones "
                "that have waited longest for their request",
                level=logging.INFO,
            )  # fmt: skip
        elif not self._waiting and not self._answering:
            self._telemetry.recovered("listen_full", "listen: below listen_max_connections again")
        sock.setblocking(False)
        try:
            wrapped, generation = self._wrap(sock)
        except (OSError, ValueError) as exc:
            log.debug("listen: cannot set up the connection from %s: %r", address, exc)
            sock.close()
            return
        tls = isinstance(wrapped, ssl.SSLSocket)
        conn = Connection(wrapped, address, handshaking=tls, generation=generation)
        self._wait(conn)
        self._readable(conn)  # a scraper's request (or ClientHello) is usually here already

    def _refuse(self, sock: socket.socket) -> None:
        self._telemetry.failing(
            "listen_full", "listen_connections",
            f"listen: {self._max} connections are being answered (listen_max_connections); "
            "refusing new ones until one finishes",
            level=logging.INFO,
        )  # fmt: skip
        try:
            if not self._is_tls():
                sock.setblocking(False)
                sock.send(REFUSED)
                sock.shutdown(socket.SHUT_WR)
                sock.recv(MAX_HEAD_BYTES)  # a request left unread would turn the close into a reset
        except OSError:  # (BlockingIOError: nothing to read yet)
            pass
        sock.close()

    def _wait(self, conn: Connection) -> None:
        """Wait (again) for a request on ``conn``, under a fresh deadline."""
        conn.deadline = self._clock() + self._deadline
        self._waiting[conn] = None
        self._selector.register(conn.sock, selectors.EVENT_READ, conn)

    def _drop(self, conn: Connection) -> None:
        self._waiting.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn.sock)
        conn.close()

    def _readable(self, conn: Connection) -> None:
        if conn.handshaking and not self._handshake(conn):
            return
        while True:
            try:
                chunk = conn.sock.recv(16384)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except OSError:  # reset, or a TLS error after the handshake
                self._drop(conn)
                return
            if not chunk:
                self._drop(conn)
                return
            conn.buffer += chunk
            if b"\n\n" in conn.buffer or b"\r\n\r\n" in conn.buffer:
                break
            if len(conn.buffer) > MAX_HEAD_BYTES:
                break
        head = conn.head()
        if head is not None and conn.reused and conn.generation != self._generation():
            self._drop(conn)  # kept from a web configuration no longer in force: the client retries
        elif head is not None:
            self._dispatch(conn, head)
        elif len(conn.buffer) > MAX_HEAD_BYTES:
            with contextlib.suppress(OSError):
                conn.sock.send(TOO_LARGE)
            self._drop(conn)

    def _handshake(self, conn: Connection) -> bool:
        assert isinstance(conn.sock, ssl.SSLSocket)
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._selector.modify(conn.sock, selectors.EVENT_READ, conn)
            return False
        except ssl.SSLWantWriteError:
            self._selector.modify(conn.sock, selectors.EVENT_WRITE, conn)
            return False
        except (ssl.SSLError, OSError) as exc:  # no client certificate, an old TLS version, not TLS
            log.debug("listen: TLS handshake with %s failed: %s", conn.address, exc)
            self._drop(conn)
            return False
        conn.handshaking = False
        self._selector.modify(conn.sock, selectors.EVENT_READ, conn)
        return True

    def _dispatch(self, conn: Connection, head: bytes) -> None:
        self._waiting.pop(conn, None)
        self._selector.unregister(conn.sock)
        self._answering[conn] = self._clock()
        self._workers.submit(conn, head)

    def _take_back(self) -> None:
        while True:
            try:
                conn, keep = self._done.get_nowait()
            except queue.Empty:
                return
            self._answering.pop(conn, None)
            if not keep or self._stopping or conn.generation != self._generation():
                conn.close()
                continue
            try:
                conn.sock.setblocking(False)
            except OSError:
                conn.close()
                continue
            conn.reused = True
            head = conn.head()  # a pipelined request is already here
            if head is not None:
                self._answering[conn] = self._clock()
                self._workers.submit(conn, head)
            else:
                self._wait(conn)
                if isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending():
                    self._readable(conn)  # decrypted already: the descriptor will not turn readable

    def _expire(self) -> None:
        now = self._clock()
        while self._waiting:
            conn = next(iter(self._waiting))
            if conn.deadline > now:
                return
            log.debug("listen: %s sent no whole request in %gs; closing", conn.address, self._deadline)
            self._drop(conn)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: a wake is pending anyway
            self._wake_w.send(b"\0")

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _close_all(self) -> None:
        for conn in list(self._waiting):
            self._drop(conn)
        for conn in list(self._answering):  # a worker blocked on it fails at once
            with contextlib.suppress(OSError):
                socket.socket.shutdown(conn.sock, socket.SHUT_RDWR)
        self._workers.stop()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    # -- worker threads --------------------------------------------------------
    def _answer(self, conn: Connection, head: bytes) -> None:
        keep = False
        try:
            conn.sock.settimeout(self._deadline)
            keep = self._serve(conn, head)
        except Exception as exc:  # a client that hangs up or stops reading is routine here
            log.debug("listen: answering %s failed: %r", conn.address, exc)
        self._done.put((conn, keep))
        self._wake()

    @property
    def open_connections(self) -> int:
        return len(self._waiting) + len(self._answering)
