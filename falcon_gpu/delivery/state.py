"""A sink's delivery state, held explicitly.

Control flow (whether ``close`` waits for the server, whether a batch that is
spooled counts as ``spooled``) reads this, never the telemetry's log-once
keys: those only decide what is logged and counted, so renaming one cannot
change a shutdown. Written by the delivery threads, read by any; each field is
one reference, replaced whole.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class DeliveryState:
    server_down_since: float | None = None
    """``time.monotonic()`` of the first failed attempt of the current outage; None while
    the last attempt was acknowledged (a refusal for good does not end an outage)."""

    spool_unwritable_since: float | None = None
    """When appending to the spool started failing (batches wait in the memory lane);
    None while it can be written."""

    @property
    def server_down(self) -> bool:
        return self.server_down_since is not None

    def attempt_failed(self) -> None:
        if self.server_down_since is None:
            self.server_down_since = time.monotonic()

    def acknowledged(self) -> None:
        self.server_down_since = None

    def spool_write_failed(self) -> None:
        if self.spool_unwritable_since is None:
            self.spool_unwritable_since = time.monotonic()

    def spool_written(self) -> None:
        self.spool_unwritable_since = None
