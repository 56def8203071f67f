"""What a sink supplies to delivery: how to encode a cycle and how to push it.

A sink is composed with a delivery path, not derived from one::

    QueuedDelivery(config, RemoteWritePusher(...), spool_dir=..., ...)   # queue, spool, retry
    LatestDelivery(config, PushgatewayPusher(...), ...)                  # newest state only

Delivery owns every thread, wait, retry, spool and count; a pusher only turns
a cycle into items, items into a body, and a body into one request whose
answer it classifies: it returns :class:`~.outcome.Ack` (acknowledged, maybe
with items refused one by one) or raises :class:`~.outcome.PermanentError` or
:class:`~.outcome.RetryableError` (with the server's ``Retry-After``). Pushers
are called from one delivery thread only.

``R`` is the rendered cycle (:class:`falcon_gpu.sinks.base.Rendered`); delivery
does not look into it, so it does not import the sinks package.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from falcon_gpu.delivery.outcome import Ack

R = TypeVar("R", contravariant=True)
T = TypeVar("T")
S = TypeVar("S")


class BatchPusher(Protocol[R, T]):
    """A sink on the queued path: every cycle is delivered, in order, through the spool."""

    def explode(self, rendered: R) -> Sequence[T]:
        """The cycle as countable items (samples); cheap, runs in the cycle."""

    def encode(self, items: Sequence[T]) -> bytes:
        """One ready-to-send body for a batch; stored in the spool as is."""

    def push(self, body: bytes, samples: int) -> Ack:
        """Send one body and classify the answer (see :mod:`.outcome`)."""

    def closing(self) -> Sequence[T]:
        """Items to deliver after the last cycle at a clean shutdown (remote_write's
        staleness markers); usually none."""

    def check(self) -> tuple[bool, str]:
        """For ``doctor``: one request on the write path that changes nothing."""

    def close(self) -> None:
        """Release connections (called once the sender stopped)."""


class StatePusher(Protocol[R, S]):
    """A sink on the latest-state path: only the newest cycle matters (Pushgateway)."""

    def state(self, rendered: R) -> tuple[S, int]:
        """The cycle's state and its sample count (cheap: encoding happens in the sender)."""

    def push(self, state: S) -> Ack:
        """Send one state and classify the answer."""

    def check(self) -> tuple[bool, str]:
        """For ``doctor``: one request on the write path that changes nothing."""

    def close(self, timeout: float) -> None:
        """Runs once after the last push (e.g. delete the group), then releases connections."""
