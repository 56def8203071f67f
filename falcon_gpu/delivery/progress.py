"""Progress of a long spool replay, for the log: a backlog of hours should not drain silently.

Started when the spool held data at start or when a batch had to wait (an outage);
logs at most every :data:`PROGRESS_EVERY` seconds while batches go out, and once when
the spool is caught up.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("falcon_gpu.delivery")
PROGRESS_EVERY = 10.0


class ReplayProgress:
    """Logs a long replay: at most every PROGRESS_EVERY seconds, and once when it ends."""

    def __init__(self, sink: str, backlog: int) -> None:
        self._sink = sink
        self._total = backlog
        self._batches = 0
        self._started = time.monotonic()
        self._last = self._started

    def begin(self, backlog: int) -> None:
        if backlog and not self._total:
            self._total, self._batches = backlog, 0
            self._started = self._last = time.monotonic()

    def step(self, left: int) -> None:
        if not self._total:
            return
        self._batches += 1
        now = time.monotonic()
        if now - self._last >= PROGRESS_EVERY:
            self._last = now
            log.info(
                "sink %s: replaying the spool: %d batches sent, %d bytes left",
                self._sink,
                self._batches,
                left,
            )

    def done(self) -> None:
        if self._total and self._batches:
            log.info(
                "sink %s: spool replayed: %d batches in %.1f s",
                self._sink,
                self._batches,
                time.monotonic() - self._started,
            )
        self._total = 0
