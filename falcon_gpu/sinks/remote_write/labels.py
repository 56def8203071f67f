"""Label sets for remote write: validated and sorted once per distinct series.

Prometheus answers 500 to a duplicated label name (a naive sender then retries
forever) and rejects invalid names, so a series is checked here, before it can
reach a batch: metric name ``[a-zA-Z_:][a-zA-Z0-9_:]*``, label names
``[a-zA-Z_][a-zA-Z0-9_]*``, no name twice. A label with an empty value is not a
reason to refuse: Prometheus treats it as absent, so it is left out.

Every series also gets the sink's ``job`` and ``instance``, as a scrape would
attach its target's: a series that already has one of these labels keeps its
value as ``exported_job`` / ``exported_instance`` (Prometheus's
``honor_labels: false``).

Label sets repeat every cycle, so results are cached (bounded: cleared past
:data:`CACHE_MAX` distinct series). A refused series caches its *reason*, a
string, never an exception: an exception raised again every cycle would grow
its traceback and keep every rendered cycle alive.
"""

from __future__ import annotations

import re

from falcon_gpu.model.samples import Labels
from falcon_gpu.model.text import utf8_text

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
CACHE_MAX = 200_000


class InvalidSeries(ValueError):
    """A series Prometheus would refuse; the message says which name or value and why."""


class Refused(str):
    """Why a series is refused (a cached string, see the module docstring)."""

    __slots__ = ()


def _build(name: str, labels: Labels, target: Labels) -> Labels | Refused:
    if not METRIC_NAME.fullmatch(name):
        return Refused(f"invalid metric name {name!r}")
    seen = {"__name__"}
    taken = {k for k, _ in target}
    out = [("__name__", name), *target]
    for pair in labels:
        key, value = pair
        if key in seen:
            return Refused(f"{name}: label {key!r} appears twice")
        if not LABEL_NAME.fullmatch(key):
            return Refused(f"{name}: invalid label name {key!r}")
        seen.add(key)
        if value == "":
            continue
        clean = utf8_text(value)  # a lone surrogate would make the whole request unencodable
        if clean is not value:
            pair = (key, clean)
        # the series' own pair where it needs no change, not a copy: the cache holds every series'
        # label set (a copy was 56 bytes a label, 4.8 MiB at 2,000 pods)
        out.append((f"exported_{key}", clean) if key in taken else pair)
    if len({k for k, _ in out}) < len(out):  # both "exported_job" and "job" given
        return Refused(f"{name}: a label appears twice once job/instance are added")
    return tuple(sorted(out))


class LabelCache:
    """The sorted label set with ``__name__`` (and ``job``/``instance`` when given) per series."""

    def __init__(self, *, job: str | None = None, instance: str | None = None) -> None:
        self._target: Labels = tuple(
            (k, v) for k, v in (("instance", instance), ("job", job)) if v is not None and v != ""
        )
        self._cache: dict[tuple[str, Labels], Labels | Refused] = {}

    def lookup(self, name: str, labels: Labels) -> Labels | Refused:
        """The label set, or why Prometheus would refuse it (a :class:`Refused`)."""
        key = (name, labels)
        found = self._cache.get(key)
        if found is None:
            found = _build(name, labels, self._target)
            if len(self._cache) >= CACHE_MAX:
                self._cache.clear()
            self._cache[key] = found
        return found

    def series(self, name: str, labels: Labels) -> Labels:
        """Like :meth:`lookup`; raises a new InvalidSeries for a refused series."""
        found = self.lookup(name, labels)
        if isinstance(found, Refused):
            raise InvalidSeries(str(found))
        return found
