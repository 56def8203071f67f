"""The sink behind ``listen``: it holds the newest cycle's ``/metrics`` bodies for scrapers.

The cycle is rendered and encoded on the cycle's thread, in :meth:`LatestCycle.submit`: once per
cycle for each body scrapers have asked for (text or OpenMetrics, plain or gzip'd; at most four),
and the finished bodies (immutable ``bytes``) are handed over whole, one reference swap under a
lock. A scrape takes the body under that lock: it never renders, never touches an encoder's cache,
and ten scrapers of one cycle cost one encoding. The first scrape of a body not yet asked for
encodes it from the cycle's batch (immutable) with fresh encoders, once, and from then on each
cycle encodes it too.

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
from falcon_gpu.model.samples import PromBatch
from falcon_gpu.sinks.base import Rendered, Sink
from falcon_gpu.sinks.encoding import prom_text

Format = Literal["text", "openmetrics"]
MISSED_INTERVALS = 3
GZIP_LEVEL = 6


Key = tuple[Format, bool]
"""(format, gzip'd): one ``/metrics`` body."""


class LatestCycle(Sink):
    def __init__(self, interval: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = "listen"
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()  # guards the hand-over and the bodies asked for
        self._batch: PromBatch | None = None
        self._bodies: dict[Key, bytes] = {}
        """The newest cycle's bodies: replaced whole at each hand-over, never written after."""
        self._asked: set[Key] = set()
        self._started = clock()
        self._last: float | None = None
        self._text = prom_text.SeriesText()
        """The text encoder's cache, used on the cycle's thread only (:meth:`submit`)."""
        self._first_lock = threading.Lock()  # one first encoding of a body at a time

    def submit(self, rendered: Rendered) -> None:
        """Render and encode the cycle here, on the cycle's thread, then hand it over."""
        batch = rendered.prometheus
        with self._lock:
            asked = tuple(self._asked)
        bodies = _encoded(batch, asked, self._text)
        now = self._clock()
        with self._lock:
            self._batch, self._bodies = batch, bodies
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
        key = (fmt, gzipped)
        with self._lock:
            batch, found = self._batch, self._bodies.get(key)
            if batch is None:
                return None
            self._asked.add(key)  # the next cycles encode it on their thread
        if found is not None:
            return found
        with self._first_lock:
            with self._lock:
                batch, found = self._batch, self._bodies.get(key)
            if found is None and batch is not None:
                found = _encoded(batch, (key,), None)[key]
                with self._lock:
                    if self._batch is batch:  # still the newest cycle: later scrapes take it
                        self._bodies = {**self._bodies, key: found}
            return found


def _encoded(batch: PromBatch, keys: tuple[Key, ...], text: prom_text.SeriesText | None) -> dict[Key, bytes]:
    """The bodies ``keys`` of ``batch``, each format encoded once for plain and gzip'd alike.
    ``text``: the text encoder's cache (None: a fresh one)."""
    plain: dict[Format, bytes] = {}
    out: dict[Key, bytes] = {}
    for fmt, gzipped in sorted(keys):
        body = plain.get(fmt)
        if body is None:
            encoded = openmetrics.encode(batch) if fmt == "openmetrics" else prom_text.encode(batch, text)
            body = plain[fmt] = encoded.encode()
        out[(fmt, gzipped)] = gzip.compress(body, GZIP_LEVEL, mtime=0) if gzipped else body
    return out
