"""The interface between the agent and every sink.

The agent renders a cycle once and hands the same :class:`Rendered` to every
sink through :meth:`Sink.submit`, which must not block on the network. A
network sink is a pusher (``encode`` and ``push``, in its own module here)
composed with a delivery path from :mod:`falcon_gpu.delivery`, which owns the
queue, spool, retries and counting; those paths implement this interface
structurally (it is a protocol), so delivery does not import this package.
A sink without a wire (``stdout``) may subclass :class:`Sink` directly.
"""

from __future__ import annotations

import abc
from typing import Protocol

from falcon_gpu.model.samples import FalconItem, PromBatch, PromGroup


class Rendered(Protocol):
    """One cycle, rendered lazily in whichever schema a sink consumes."""

    @property
    def prometheus(self) -> PromBatch: ...

    @property
    def falcon(self) -> tuple[FalconItem, ...]: ...

    @property
    def job_groups(self) -> tuple[PromGroup, ...]: ...


class Sink(Protocol):
    """A destination; ``name`` is its ``sink`` label and spool directory."""

    name: str

    @abc.abstractmethod
    def submit(self, rendered: Rendered) -> None:
        """Take one cycle. Never raises for a delivery problem and never blocks on I/O
        beyond a local write; failures are counted in telemetry."""

    def flush(self, timeout: float) -> bool:
        """Deliver or spool everything submitted so far; True when nothing is left pending."""
        return True

    def close(self, timeout: float) -> None:
        """Flush, then release connections and threads. Called once at shutdown."""
        self.flush(timeout)

    def check(self) -> tuple[bool, str]:
        """For ``doctor``: can this sink reach its destination? Never shows secrets."""
        return True, "ok"

    def undelivered(self) -> str | None:
        """After ``close``: why the newest cycle never reached the destination, where it is then
        lost (a latest-state sink keeps no spool); None when it arrived, or waits in a spool for
        the next run. ``run --once`` exits 1 on it: a cron job must see that nothing arrived."""
        return None
