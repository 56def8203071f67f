"""The interface between the agent and every sink.

The agent renders a cycle once and hands the same :class:`Rendered` to every
sink through :meth:`Sink.submit`, which must not block on the network: network
sinks enqueue and deliver from their own worker (see :mod:`falcon_gpu.delivery`).
"""

from __future__ import annotations

import abc
from typing import Literal, Protocol

from falcon_gpu.model.samples import FalconItem, PromBatch, PromGroup


class Rendered(Protocol):
    """One cycle, rendered lazily in whichever schema a sink consumes."""

    @property
    def prometheus(self) -> PromBatch: ...

    @property
    def falcon(self) -> tuple[FalconItem, ...]: ...

    @property
    def job_groups(self) -> tuple[PromGroup, ...]: ...


class Sink(abc.ABC):
    """A destination. ``consumes`` says which schema family the agent must render for it."""

    name: str
    consumes: Literal["prometheus", "falcon"]

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
