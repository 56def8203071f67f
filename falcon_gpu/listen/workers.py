"""The threads that answer ``listen``'s requests: at most one per connection, started as needed."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

Job = TypeVar("Job")


class Workers(Generic[Job]):
    """At most ``limit`` daemon threads, started as needed and kept: a stuck client never keeps
    the agent from exiting, and a quiet endpoint holds no more threads than it ever needed."""

    def __init__(self, limit: int, work: Callable[[Job, bytes], None]) -> None:
        self._limit = limit
        self._work = work
        self._queue: queue.SimpleQueue[tuple[Job, bytes] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def submit(self, job: Job, head: bytes) -> None:
        with self._lock:
            if self._idle == 0 and self._threads < self._limit:
                self._threads += 1
                threading.Thread(target=self._run, name="falcon-gpu-listen-answer", daemon=True).start()
            else:
                self._idle -= 1  # an idle worker takes it (below 0 for a moment: one is finishing)
        self._queue.put((job, head))

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            self._work(*job)
            with self._lock:
                self._idle += 1

    def stop(self) -> None:
        with self._lock:
            threads = self._threads
        for _ in range(threads):
            self._queue.put(None)
