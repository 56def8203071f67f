"""The agent's own health: counters every stage reports into, and log-once logging.

Failures are values at the edges: a failing GPU, socket or sink increments
``errors_total{kind}`` every time, but is logged only when it starts failing and
when it recovers, never every cycle. Thread-safe: sink workers, the XID thread
and the cycle all report here.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict

import msgspec

log = logging.getLogger("falcon_gpu")

OUTCOMES = ("sent", "spooled", "dropped")


class TelemetryView(msgspec.Struct, frozen=True, gc=False):
    """A consistent copy of the counters, for the schemas (one a cycle)."""

    cycles_total: int
    cycles_skipped_total: int
    last_cycle_seconds: float | None
    errors_total: dict[str, int]
    samples_total: dict[tuple[str, str], int]
    spool_bytes: dict[str, int]
    readers: dict[str, tuple[bool, float]]
    """Per NVML reader, the last cycle: (succeeded on every GPU, seconds over all GPUs)."""


class Telemetry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cycles = 0
        self._skipped = 0
        self._last_cycle: float | None = None
        self._errors: dict[str, int] = defaultdict(int)
        self._samples: dict[tuple[str, str], int] = defaultdict(int)
        self._spool: dict[str, int] = {}
        self._failing: set[str] = set()
        self._readers: dict[str, tuple[bool, float]] = {}
        self._errors_copy: dict[str, int] | None = None
        self._spool_copy: dict[str, int] | None = None
        """The last view's copies of the error and spool counters, while they did not change (most
        cycles: no error, no spool): each view hands the same copy out instead of copying again.
        None: changed since (set under the lock by every change)."""

    # -- counters ---------------------------------------------------------
    def cycle_done(self, seconds: float) -> None:
        with self._lock:
            self._cycles += 1
            self._last_cycle = seconds

    def cycle_skipped(self) -> None:
        with self._lock:
            self._skipped += 1

    def error(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self._errors[kind] += n
            self._errors_copy = None

    def samples(self, sink: str, outcome: str, n: int) -> None:
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        with self._lock:
            self._samples[(sink, outcome)] += n

    def spool_bytes(self, sink: str, n: int) -> None:
        with self._lock:
            self._spool[sink] = n
            self._spool_copy = None

    def readers_done(self, outcome: dict[str, tuple[bool, float]]) -> None:
        """The NVML readers' outcome of one cycle: name -> (succeeded on every GPU, seconds).

        ``outcome`` is handed over: the caller builds a new dict each cycle and never changes it
        after, so the views share it instead of copying it."""
        with self._lock:
            self._readers = outcome

    def register_sink(self, sink: str) -> None:
        """Make a sink's series exist at 0 before its first batch (no absent series for alerts)."""
        with self._lock:
            for outcome in OUTCOMES:
                self._samples.setdefault((sink, outcome), 0)

    def view(self) -> TelemetryView:
        with self._lock:
            errors = self._errors_copy
            if errors is None:
                errors = self._errors_copy = dict(self._errors)
            spool = self._spool_copy
            if spool is None:
                spool = self._spool_copy = dict(self._spool)
            return TelemetryView(
                cycles_total=self._cycles,
                cycles_skipped_total=self._skipped,
                last_cycle_seconds=self._last_cycle,
                errors_total=errors,
                samples_total=dict(self._samples),
                spool_bytes=spool,
                readers=self._readers,
            )

    # -- log once ---------------------------------------------------------
    def failing(self, key: str, kind: str, message: str, *, level: int = logging.WARNING) -> None:
        """Count an error of ``kind``; log ``message`` only if ``key`` was not failing already."""
        with self._lock:
            self._errors[kind] += 1
            self._errors_copy = None
            first = key not in self._failing
            self._failing.add(key)
        if first:
            log.log(level, "%s", message)

    def recovered(self, key: str, message: str) -> None:
        """Log ``message`` once when ``key`` was failing and now works again."""
        if key not in self._failing:  # the usual call (every cycle, per stage): nothing to log, no lock
            return  # (a set's ``in`` is atomic; a key fails and recovers in the thread that owns it)
        with self._lock:
            was = key in self._failing
            self._failing.discard(key)
        if was:
            log.info("%s", message)

    def is_failing(self, key: str) -> bool:
        with self._lock:
            return key in self._failing
