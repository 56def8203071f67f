"""Runs the lookups' refreshes off the hot path: each on its own period, and early on request.

One daemon thread serves every task (PodResources poll, log-dir scan, API
relist): they are cheap and rare, and one thread keeps the agent's thread count
and shutdown simple. A cycle that meets something unknown (a new container)
calls :meth:`Refresher.request`, which never blocks: it only wakes the thread,
and only if the task has not run within its ``min_gap`` (rate limit), so a
container that never gets a log file cannot turn into a rescan every cycle.
A task must not raise (they report into telemetry themselves); if one does, the
exception is logged and the thread keeps going.

:meth:`Refresher.wait_first_round` lets the agent's first cycle wait (bounded) until
every task has run once, so the first cycle after a start is attributed like the
rest instead of going out with every process unattributed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("falcon_gpu.attribution")


class _Task:
    __slots__ = ("fn", "last_run", "lock", "min_gap", "name", "period", "requested")

    def __init__(self, name: str, fn: Callable[[], None], period: float, min_gap: float) -> None:
        self.name = name
        self.fn = fn
        self.period = period
        self.min_gap = min_gap
        self.last_run: float | None = None
        self.requested = False
        self.lock = threading.Lock()


class Refresher:
    def __init__(self, *, name: str = "falcon-gpu-attribution") -> None:
        self._name = name
        self._tasks: dict[str, _Task] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._state = threading.Lock()
        self._first_round = threading.Event()

    def add(self, name: str, fn: Callable[[], None], *, period: float, min_gap: float) -> None:
        self._tasks[name] = _Task(name, fn, period, min_gap)

    def run(self, name: str) -> None:
        """Run one task now, in the caller's thread (waits for a run in progress)."""
        task = self._tasks[name]
        with task.lock:
            with self._state:
                task.requested = False
            try:
                task.fn()
            except Exception:
                log.exception("attribution refresh %r failed", name)
            with self._state:
                task.last_run = time.monotonic()
                if all(t.last_run is not None for t in self._tasks.values()):
                    self._first_round.set()

    def run_all(self) -> None:
        for name in self._tasks:
            self.run(name)

    def wait_first_round(self, timeout: float) -> bool:
        """Block until every task has run at least once (True), or ``timeout`` s passed (False).
        True at once when there is nothing to refresh."""
        return not self._tasks or self._first_round.wait(timeout)

    def request(self, name: str) -> bool:
        """Ask for an early run of ``name``; False when rate-limited. Never blocks on I/O."""
        task = self._tasks.get(name)
        if task is None:
            return False
        with self._state:
            if task.last_run is not None and time.monotonic() - task.last_run < task.min_gap:
                return False
            task.requested = True
        self._wake.set()
        return True

    def start(self) -> None:
        """Start the thread (first runs every task at once); idempotent."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def signal_stop(self) -> None:
        """Ask the thread to stop after the task in progress, without waiting for it."""
        self._stop.set()
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self.signal_stop()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def _due(self, now: float) -> tuple[list[str], float]:
        due: list[str] = []
        wait = 3600.0
        with self._state:
            for task in self._tasks.values():
                if task.last_run is None or task.requested or now - task.last_run >= task.period:
                    due.append(task.name)
                else:
                    wait = min(wait, task.last_run + task.period - now)
        return due, wait

    def _loop(self) -> None:
        while not self._stop.is_set():
            due, wait = self._due(time.monotonic())
            for name in due:
                if self._stop.is_set():
                    return
                self.run(name)
            if due:
                continue
            self._wake.wait(max(0.05, wait))
            self._wake.clear()
