"""The sink behind ``listen``: it holds the newest rendered cycle for scrapers.

Handing a cycle over is one reference swap under a lock, so the cycle never
waits for a scraper. The body is encoded lazily, once per cycle and format, by
the first scrape that wants it (gzip'd once more if asked), and cached until
the next cycle: ten scrapers of one cycle cost one encoding.

Health follows the cycles: ready after the first one; healthy while the last
one (or the start, before the first) is at most three intervals old.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from typing import Literal

from falcon_gpu.listen import openmetrics
from falcon_gpu.sinks.base import Rendered, Sink
from falcon_gpu.sinks.encoding import prom_text

Format = Literal["text", "openmetrics"]
MISSED_INTERVALS = 3
GZIP_LEVEL = 6


class LatestCycle(Sink):
    def __init__(self, interval: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = "listen"
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()  # guards the hand-over only
        self._rendered: Rendered | None = None
        self._generation = 0
        self._started = clock()
        self._last: float | None = None
        self._encode_lock = threading.Lock()  # one encoding at a time; the cycle never takes it
        self._cache_generation = -1
        self._cache: dict[tuple[Format, bool], bytes] = {}

    def submit(self, rendered: Rendered) -> None:
        now = self._clock()
        with self._lock:
            self._rendered = rendered
            self._generation += 1
            self._last = now

    # -- state for /readyz and /healthz -------------------------------------
    def use_interval(self, interval: float) -> None:
        """A reloaded configuration's ``interval`` (SIGHUP): ``/healthz`` judges cycles by it."""
        self._interval = interval

    def ready(self) -> bool:
        with self._lock:
            return self._last is not None

    def health(self) -> tuple[bool, str]:
        """(healthy, why): unhealthy once three intervals pass without a cycle."""
        with self._lock:
            last = self._last
        age = self._clock() - (self._started if last is None else last)
        limit = MISSED_INTERVALS * self._interval
        since = "the start (no cycle yet)" if last is None else "the last cycle"
        if age > limit:
            return False, f"{age:.1f}s since {since}, more than {MISSED_INTERVALS} intervals ({limit:g}s)\n"
        return True, f"ok: {age:.1f}s since {since}\n"

    # -- the body for /metrics ----------------------------------------------
    def body(self, fmt: Format, *, gzipped: bool) -> bytes | None:
        """The newest cycle encoded as asked; None before the first cycle."""
        with self._lock:
            rendered, generation = self._rendered, self._generation
        if rendered is None:
            return None
        with self._encode_lock:
            if generation != self._cache_generation:
                self._cache_generation, self._cache = generation, {}
            key = (fmt, gzipped)
            found = self._cache.get(key)
            if found is None:
                if gzipped:
                    found = gzip.compress(self._plain(rendered, fmt), GZIP_LEVEL, mtime=0)
                else:
                    found = self._plain(rendered, fmt)
                self._cache[key] = found
            return found

    def _plain(self, rendered: Rendered, fmt: Format) -> bytes:
        found = self._cache.get((fmt, False))
        if found is None:
            batch = rendered.prometheus
            text = openmetrics.encode(batch) if fmt == "openmetrics" else prom_text.encode(batch)
            found = self._cache[(fmt, False)] = text.encode()
        return found
