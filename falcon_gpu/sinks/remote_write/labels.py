"""Label sets for remote write: validated and sorted once per distinct series.

Prometheus answers 500 to a duplicated label name (a naive sender then retries
forever) and rejects invalid names and empty values, so a series is checked
here, before it can reach a batch: metric name ``[a-zA-Z_:][a-zA-Z0-9_:]*``,
label names ``[a-zA-Z_][a-zA-Z0-9_]*``, no empty value, no name twice. Label
sets repeat every cycle, so results are cached (bounded: cleared past
:data:`CACHE_MAX` distinct series).
"""

from __future__ import annotations

import re

from falcon_gpu.model.samples import Labels

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
CACHE_MAX = 200_000


class InvalidSeries(ValueError):
    """A series Prometheus would refuse; the message says which name or value and why."""


def _build(name: str, labels: Labels) -> Labels:
    if not METRIC_NAME.fullmatch(name):
        raise InvalidSeries(f"invalid metric name {name!r}")
    seen = {"__name__"}
    for key, value in labels:
        if key in seen:
            raise InvalidSeries(f"{name}: label {key!r} appears twice")
        if not LABEL_NAME.fullmatch(key):
            raise InvalidSeries(f"{name}: invalid label name {key!r}")
        if value == "":
            raise InvalidSeries(f"{name}: label {key!r} has an empty value")
        seen.add(key)
    return tuple(sorted((("__name__", name), *labels)))


class LabelCache:
    """``series(name, labels)``: the sorted label set with ``__name__``; raises InvalidSeries."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, Labels], Labels | InvalidSeries] = {}

    def series(self, name: str, labels: Labels) -> Labels:
        key = (name, labels)
        found = self._cache.get(key)
        if found is None:
            try:
                found = _build(name, labels)
            except InvalidSeries as exc:
                found = exc
            if len(self._cache) >= CACHE_MAX:
                self._cache.clear()
            self._cache[key] = found
        if isinstance(found, InvalidSeries):
            raise found
        return found
