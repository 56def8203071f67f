"""What every sink builder gets besides its own settings: the agent-wide ones, and the
composition of a pusher with the queued delivery path."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from falcon_gpu.delivery.latest import LatestDelivery
from falcon_gpu.delivery.pusher import BatchPusher
from falcon_gpu.delivery.queued import QueuedDelivery
from falcon_gpu.delivery.settings import QueueSettings
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks.base import Rendered, Sink

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SinkContext:
    spool_dir: Path | str
    spool_max_bytes: int
    telemetry: Telemetry
    node: str = ""

    def queued(self, config: QueueSettings, pusher: BatchPusher[Rendered, T]) -> QueuedDelivery[Rendered, T]:
        """``pusher`` behind the memory queue, batcher, spool, retry and counting stage."""
        return QueuedDelivery(
            config,
            pusher,
            spool_dir=self.spool_dir,
            spool_max_bytes=self.spool_max_bytes,
            telemetry=self.telemetry,
        )


def _paths_are_sinks(
    queued: QueuedDelivery[Rendered, object], latest: LatestDelivery[Rendered, object]
) -> list[Sink]:
    """Never called: makes mypy check that both delivery paths implement :class:`Sink` (they
    do so structurally, since delivery must not import this package)."""
    return [queued, latest]
