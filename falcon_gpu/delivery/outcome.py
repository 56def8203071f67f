"""How a sink tells the delivery stages what the server said.

A sink's ``push`` returns an :class:`Ack` when the server took the batch, or
raises one of the two errors below; the retry stage alone decides to loop and
sleep. Messages must be safe to log: no secrets, server answers truncated.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ack:
    """The server took the request; ``rejected`` samples of it were refused item by item
    (Open-Falcon ``Invalid``, Nightingale ``fail``) and will not be retried."""

    rejected: int = 0


class DeliveryError(Exception):
    """Base of the classified failures; ``str()`` is safe to log."""


class PermanentError(DeliveryError):
    """The server refused the batch for good (4xx other than 429, a malformed-request
    reply): it is dropped, counted as ``dropped`` and the answer logged once."""


class RetryableError(DeliveryError):
    """Try again later: connection error, timeout, 5xx, 429. ``retry_after`` is the
    server's ``Retry-After`` in seconds when it sent one."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def truncate(text: str, limit: int = 200) -> str:
    """A server answer shortened for a log line."""
    text = text.strip().replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."
