"""Prometheus text exposition format 0.0.4, as a pure function of a batch.

Used by the stdout sink and the Pushgateway sink. Label values are escaped
(backslash, double quote, newline) as the format requires. No timestamps:
Pushgateway rejects them, and a scrape or stdout reader takes the time it reads.

The same series (metric name and label set) come back every cycle, and most of
their values do not change between cycles (memory total, limits, clocks, error
counters), so each series' rendered ``name{labels} value`` line is cached with its
value: an unchanged value reuses the line, a changed one formats only the value.
The cache is bounded (:data:`MAX_CACHED` entries, dropped all at once when full,
so a node whose pods churn cannot grow it without bound).
"""

from __future__ import annotations

import math
from typing import Final

from falcon_gpu.model.samples import Family, Labels, PromBatch

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_CACHED: Final = 65_536

_series_text: dict[tuple[str, Labels], tuple[str, float, str]] = {}
"""(name, labels) -> (``name{labels} ``, the last value, its whole line)."""


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _render_series(name: str, labels: Labels) -> str:
    if not labels:
        return name + " "
    inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels)
    return f"{name}{{{inner}}} "


def series_line(name: str, labels: Labels, value: float) -> str:
    """``name{k="v",...} value``: the label text rendered once per series, the line once per value."""
    key = (name, labels)
    cached = _series_text.get(key)
    if cached is not None:
        if cached[1] == value:
            return cached[2]
        prefix = cached[0]
    else:
        if len(_series_text) >= MAX_CACHED:
            _series_text.clear()
        prefix = _render_series(name, labels)
    line = prefix + format_value(value)
    _series_text[key] = (prefix, value, line)
    return line


def encode_family(family: Family) -> str:
    name = family.name
    lines = [f"# HELP {name} {_escape_help(family.help)}", f"# TYPE {name} {family.kind}"]
    lines.extend(series_line(name, s.labels, s.value) for s in family.series)
    return "\n".join(lines) + "\n"


def encode(batch: PromBatch) -> str:
    """The whole batch; families with no series are left out (the format allows it, but it is noise)."""
    return "".join(encode_family(f) for f in batch.families if f.series)
