"""Open-Falcon transfer: Go ``net/rpc/jsonrpc`` ``Transfer.Update`` over one TCP connection.

Wire (what Go's jsonrpc codec reads and writes): one JSON object per request,
``{"method":"Transfer.Update","params":[[items...]],"id":n}``, answered by
``{"id":n,"result":{"Message":..,"Total":..,"Invalid":..,"Latency":..},"error":null}``.
Both sides stream newline-separated JSON. The connection is opened on first
use and kept; any socket error or a reply that does not parse closes it, and
the next attempt reconnects (retried by the shared delivery stages: this module
only encodes and pushes, :func:`build` composes it with
:class:`~falcon_gpu.delivery.queued.QueuedDelivery`). A reply
with a non-null ``error`` (e.g. transfer's codec refusing a field) is
permanent; ``Invalid`` items are counted as dropped.

A kept connection may have been closed by the peer while idle (transfer behind
a load balancer that drops idle connections): a call whose kept connection
turns out closed or reset before any reply byte came is sent again once, on a
new connection, silently; only a failure of that second try is reported. (The
peer may have applied the first one: at-least-once, as everywhere else.)
``timeout`` bounds the whole call, connect to the end of the reply.
"""

from __future__ import annotations

import json
import select
import socket
import time
from typing import Any

from falcon_gpu.delivery.outcome import Ack, PermanentError, RetryableError, truncate
from falcon_gpu.delivery.queued import QueuedDelivery
from falcon_gpu.model.samples import FalconItem
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks.base import Rendered
from falcon_gpu.sinks.config import FalconTransferSinkConfig
from falcon_gpu.sinks.context import SinkContext
from falcon_gpu.sinks.encoding import falcon_json

MAX_REPLY = 1 << 20


class _PeerClosed(ConnectionError):
    """The connection was closed or reset before any byte of the reply arrived."""


class _RpcConnection:
    """One persistent JSON-RPC connection; used from the sender thread only."""

    def __init__(self, address: str, timeout: float) -> None:
        host, _, port = address.rpartition(":")
        self.addr = (host.strip("[]"), int(port))
        self._address = address
        self._timeout = timeout
        self._sock: socket.socket | None = None
        self._buf = b""
        self._id = 0
        self._reused = False

    def call(self, method: str, params: bytes) -> Any:
        """Send one request (``params`` already JSON) and return the decoded reply object.
        Raises RetryableError for socket errors, a timeout or a garbled reply (connection
        closed)."""
        self._id += 1
        request = b'{"method":"%s","params":[%s],"id":%d}\n' % (method.encode(), params, self._id)
        deadline = time.monotonic() + self._timeout
        try:
            try:
                reply = self._exchange(request, deadline)
            except _PeerClosed:
                if not self._reused:
                    raise
                self.close()  # an idle connection the peer dropped: once more on a new one
                reply = self._exchange(request, deadline)
        except TimeoutError:
            self.close()
            raise RetryableError(
                f"transfer {self._address} did not answer within {self._timeout} s"
            ) from None
        except (OSError, ValueError) as exc:
            self.close()
            raise RetryableError(f"transfer {self._address}: {exc}") from None
        if reply.get("id") != self._id:
            self.close()
            raise RetryableError(f"transfer {self._address}: reply id {reply.get('id')}, sent {self._id}")
        return reply

    def _exchange(self, request: bytes, deadline: float) -> dict[str, Any]:
        if self._sock is not None and _closed_by_peer(self._sock):
            self.close()  # seen before sending: nothing to send twice
        self._reused = self._sock is not None
        if self._sock is None:
            self._sock = socket.create_connection(self.addr, timeout=_left(deadline))
            self._buf = b""
        try:
            self._sock.sendall(request)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise _PeerClosed(str(exc)) from None
        return self._read_reply(deadline)

    def _read_reply(self, deadline: float) -> dict[str, Any]:
        """One reply line (Go's json.Encoder ends every object with a newline). Raises
        _PeerClosed for a connection closed before the reply, TimeoutError past
        ``deadline``, ValueError for a closed connection mid-reply or a reply that is not
        a JSON object."""
        assert self._sock is not None
        while b"\n" not in self._buf:
            if len(self._buf) > MAX_REPLY:
                raise ValueError("reply too large")
            self._sock.settimeout(_left(deadline))
            try:
                chunk = self._sock.recv(65536)
            except ConnectionResetError as exc:
                if self._buf:
                    raise
                raise _PeerClosed(str(exc)) from None
            if not chunk:
                if not self._buf:
                    raise _PeerClosed("connection closed by transfer")
                raise ValueError("connection closed by transfer mid-reply")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        reply = json.loads(line)
        if not isinstance(reply, dict):
            raise ValueError(f"reply is not a JSON object: {truncate(line.decode(errors='replace'))}")
        return reply

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None


def _left(deadline: float) -> float:
    """Seconds to ``deadline``; raises TimeoutError once it has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether an idle kept connection was closed by the peer (readable with no data
    pending: EOF or a reset); one poll, no blocking."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class FalconTransferPusher(falcon_json.FalconJsonBatches):
    """Implements :class:`~falcon_gpu.delivery.pusher.BatchPusher`: one ``Transfer.Update`` per batch."""

    def __init__(self, config: FalconTransferSinkConfig, *, telemetry: Telemetry) -> None:
        super().__init__(config.name, telemetry)
        self._address = config.address
        self._timeout = config.timeout
        self._conn = _RpcConnection(config.address, config.timeout)

    def push(self, body: bytes, samples: int) -> Ack:
        reply = self._conn.call("Transfer.Update", body)
        if reply.get("error") is not None:
            raise PermanentError(f"transfer refused the batch: {truncate(str(reply['error']))}")
        result = reply.get("result")
        invalid = result.get("Invalid", 0) if isinstance(result, dict) else 0
        return Ack(rejected=min(invalid, samples) if isinstance(invalid, int) else 0)

    def check(self) -> tuple[bool, str]:
        """For ``doctor``: ``Transfer.Ping`` (transfer's no-op RPC) on a connection of its own."""
        conn = _RpcConnection(self._address, self._timeout)
        try:
            reply = conn.call("Transfer.Ping", b"{}")
        except RetryableError as exc:
            return False, f"{exc}: check address (transfer's RPC port, 8433 by default)"
        finally:
            conn.close()
        if reply.get("error") is not None:
            error = truncate(str(reply["error"]))
            return (
                False,
                f"transfer at {self._address} refused Transfer.Ping ({error}): not transfer's RPC port?",
            )
        return True, f"transfer at {self._address} answers Transfer.Ping"

    def close(self) -> None:
        self._conn.close()


def build(config: FalconTransferSinkConfig, ctx: SinkContext) -> QueuedDelivery[Rendered, FalconItem]:
    return ctx.queued(config, FalconTransferPusher(config, telemetry=ctx.telemetry))
