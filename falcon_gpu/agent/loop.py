"""The scheduled loop: one cycle every ``interval`` seconds on the monotonic clock, never overlapping.

Why not APScheduler (the brief's stack named it): APScheduler 3 computes every next run time from
the wall clock (``datetime.now()`` plus the interval). Stepping the wall clock back by an hour (NTP
after a bad RTC, a VM resumed, an operator's ``date -s``) made it wait an hour for the next run, so
every series and ``/healthz`` went stale for that hour, and nothing restarts an agent that still
runs. Its triggers and job stores are wall-clock datetimes throughout, so it cannot be pointed at
``time.monotonic``. The loop it ran is small enough to own: a thread that waits on the monotonic
clock for the next grid point, runs the cycle, and counts the grid points that passed while a cycle
was still running (``cycle_overrun``, one skip each) instead of queueing cycles behind a slow GPU.

The wall clock is only read for the samples' timestamps (by the cycle). A step of it (the difference
between wall and monotonic time moving by more than :data:`STEP_TOLERANCE_S` between two cycles) is
logged once per step; the cycles go on at their interval.

The stop (``stop`` set by a signal handler or another thread) lets the running cycle finish, but
waits for it at most ``stuck_after`` seconds: a cycle stuck in a driver call (NVML can block for
minutes on a GPU in a bad state) must not keep the sinks from flushing before the kubelet's SIGKILL.
:func:`run_every` then returns False, and no further cycle starts. A ``reload`` event is looked at
before each cycle: ``on_reload`` runs there, between two cycles, and returns the interval to go on
with (the reloaded configuration's).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable

from falcon_gpu.agent.signals import wait_for
from falcon_gpu.model.telemetry import Telemetry

log = logging.getLogger(__name__)

STUCK_AFTER_S = 10.0
STEP_TOLERANCE_S = 1.0
"""A change of wall minus monotonic time below this is not a step (NTP slews both clocks alike)."""


def settle_heap() -> None:
    """Collect what start-up left, then freeze the rest out of the cyclic collector's sight.

    What exists now (modules, settings, the runtime, its caches' first entries) lives as long as
    the process, yet every full collection would walk it again: about 46,000 objects, 30 ms a
    collection, one every 200 cycles or so at 8 GPUs (0.15 ms a cycle on average, a 30 ms stall
    when it comes). Frozen (:func:`gc.freeze`), those objects are never traversed; what cycles
    allocate is collected as before, and a frozen object dropped later is still freed by its
    reference count (only a reference cycle among frozen objects would stay). The collection
    first, so that start-up garbage is freed rather than frozen."""
    gc.collect()
    gc.freeze()


class _Loop:
    """The cycle thread's state: the next due time and the wall clock's offset last seen."""

    def __init__(
        self,
        interval: float,
        cycle: Callable[[], object],
        telemetry: Telemetry,
        stop: threading.Event,
        reload: threading.Event | None,
        on_reload: Callable[[], float] | None,
    ) -> None:
        self.interval, self.cycle, self.telemetry, self.stop = interval, cycle, telemetry, stop
        self.reload, self.on_reload = reload, on_reload
        self.offset = time.time() - time.monotonic()

    def run(self) -> None:
        due = time.monotonic()
        while not self.stop.is_set():
            left = due - time.monotonic()
            if left > 0:
                self.stop.wait(left)
                continue
            self._reload_if_asked()
            self._watch_wall_clock()
            self._one()
            due = self._next_due(due + self.interval)

    def _one(self) -> None:
        try:
            self.cycle()
        except Exception as exc:  # a cycle's bug must not end the loop
            self.telemetry.failing("cycle", "cycle", f"cycle failed: {exc!r}")
            log.debug("cycle failure", exc_info=True)
        else:
            self.telemetry.recovered("cycle", "cycles work again")

    def _next_due(self, due: float) -> float:
        """The next grid point after now; each one that passed during the cycle is a skip."""
        now = time.monotonic()
        if now < due:
            self.telemetry.recovered("cycle_overrun", "cycles keep up with the interval again")
            return due
        missed = int((now - due) // self.interval) + 1
        for _ in range(missed):
            self.telemetry.cycle_skipped()
            self.telemetry.failing(
                "cycle_overrun",
                "cycle_overrun",
                f"a cycle took longer than the interval ({self.interval}s); skipping runs until it ends",
            )
        return due + missed * self.interval

    def _watch_wall_clock(self) -> None:
        offset = time.time() - time.monotonic()
        step, self.offset = offset - self.offset, offset
        if abs(step) >= STEP_TOLERANCE_S:
            log.warning(
                "the wall clock stepped %s by %.1f s; cycles keep their %gs interval (they are "
                "scheduled on the monotonic clock), sample timestamps follow the new wall clock",
                "forward" if step > 0 else "back",
                abs(step),
                self.interval,
            )

    def _reload_if_asked(self) -> None:
        if self.reload is None or self.on_reload is None or not self.reload.is_set():
            return
        self.reload.clear()
        try:
            self.interval = self.on_reload()
        except Exception as exc:  # a reload's bug keeps the running configuration
            log.error("reloading the configuration failed: %r; keeping the running configuration", exc)


def run_every(
    interval: float,
    cycle: Callable[[], object],
    telemetry: Telemetry,
    stop: threading.Event,
    *,
    stuck_after: float = STUCK_AFTER_S,
    reload: threading.Event | None = None,
    on_reload: Callable[[], float] | None = None,
) -> bool:
    """Run ``cycle`` now and then every ``interval`` seconds (monotonic) until ``stop`` is set.

    True when the last cycle finished; False when one was still running ``stuck_after`` seconds
    after the stop (its thread, a daemon, is left behind)."""
    loop = _Loop(interval, cycle, telemetry, stop, reload, on_reload)
    thread = threading.Thread(target=loop.run, name="falcon-gpu-cycle", daemon=True)
    thread.start()
    wait_for(stop)  # set by a signal handler or another thread
    thread.join(stuck_after)
    if thread.is_alive():
        log.error("a cycle is still running %gs after the stop (NVML not answering?); "
                  "shutting down without it", stuck_after)  # fmt: skip
        return False
    return True
