"""Prometheus text exposition format 0.0.4, as a pure function of a batch.

Used by the stdout sink and the Pushgateway sink. Label values are escaped
(backslash, double quote, newline) as the format requires; timestamps are
optional because Pushgateway rejects them.
"""

from __future__ import annotations

import math

from falcon_gpu.model.samples import Family, PromBatch

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


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


def encode_family(family: Family, timestamp_ms: int | None = None) -> str:
    suffix = f" {timestamp_ms}" if timestamp_ms is not None else ""
    lines = [f"# HELP {family.name} {_escape_help(family.help)}", f"# TYPE {family.name} {family.kind}"]
    for s in family.series:
        if s.labels:
            inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in s.labels)
            lines.append(f"{family.name}{{{inner}}} {format_value(s.value)}{suffix}")
        else:
            lines.append(f"{family.name} {format_value(s.value)}{suffix}")
    return "\n".join(lines) + "\n"


def encode(batch: PromBatch, *, with_timestamps: bool = False) -> str:
    """The whole batch; families with no series are left out (the format allows it, but it is noise)."""
    ts = batch.timestamp_ms if with_timestamps else None
    return "".join(encode_family(f, ts) for f in batch.families if f.series)
