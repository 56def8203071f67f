"""``falcon-gpu stats``: recent job records under ``jobs_dir`` as a table, newest first.

Reads the rotated JSON-lines files only (no NVML, no agent needed), so it works
on a node whose agent is stopped. ``--since`` takes seconds or a number with
``s``, ``m``, ``h`` or ``d``; a bad value is a usage error (exit 2).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from falcon_gpu.jobs.records_file import JobLog
from falcon_gpu.model.jobs import JobRecord, iso

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
COLUMNS = (
    "END",
    "NAMESPACE",
    "POD",
    "CONTAINER",
    "GPU",
    "DURATION",
    "ENERGY_J",
    "CO2E_G",
    "MAX_MEM_MIB",
    "AVG_UTIL",
    "XIDS",
    "THROTTLED",
)


def parse_duration(text: str) -> float:
    """``30m`` -> 1800.0. Raises ValueError for anything else, or for 0."""
    m = _DURATION.fullmatch(text.strip().lower())
    if m is None or float(m.group(1)) <= 0:
        raise ValueError(f"expected seconds or a number with s, m, h or d (e.g. 30m, 2h, 1d), got {text!r}")
    return float(m.group(1)) * _UNIT[m.group(2)]


def _span(seconds: float) -> str:
    s = round(seconds)
    h, rest = divmod(s, 3600)
    return f"{h}h{rest // 60:02d}m{rest % 60:02d}s" if h else f"{rest // 60}m{rest % 60:02d}s"


def _row(r: JobRecord) -> tuple[str, ...]:
    gpu = str(r.gpu_index) if r.gpu_instance is None else f"{r.gpu_index}/gi{r.gpu_instance}"
    util = "-" if r.utilization_mean_ratio is None else f"{r.utilization_mean_ratio * 100:.0f}%"
    xids = ",".join(f"{x}x{n}" if n > 1 else str(x) for x, n in r.xids.items()) or "-"
    throttled = ",".join(f"{k}={v:.0f}s" for k, v in r.throttled_seconds.items() if v > 0) or "-"
    return (
        iso(r.end),
        r.namespace,
        r.pod,
        r.container,
        gpu,
        _span(r.duration_seconds),
        f"{r.energy_joules:.1f}",
        "-" if r.emissions_grams is None else f"{r.emissions_grams:.1f}",
        f"{r.memory_max_bytes / (1 << 20):.0f}",
        util,
        xids,
        throttled,
    )


def select(
    records: Iterable[JobRecord], *, namespace: str | None, pod: str | None, since: float | None, now: float
) -> list[JobRecord]:
    """The matching records, newest (latest end) first."""
    cutoff = None if since is None else now - since
    kept = [
        r
        for r in records
        if (namespace is None or r.namespace == namespace)
        and (pod is None or r.pod == pod)
        and (cutoff is None or r.end >= cutoff)
    ]
    return sorted(kept, key=lambda r: r.end, reverse=True)


def table(records: list[JobRecord]) -> str:
    rows = [COLUMNS, *(_row(r) for r in records)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def stats(
    jobs_dir: Path, *, namespace: str | None, pod: str | None, since: float | None, out: TextIO = sys.stdout
) -> int:
    """Print the table; 0 even when nothing matches (an empty table says so). Raises OSError."""
    found = select(JobLog(jobs_dir).read(), namespace=namespace, pod=pod, since=since, now=time.time())
    if not found:
        out.write(f"no job records{' matching' if namespace or pod or since else ''} under {jobs_dir}\n")
        return 0
    out.write(table(found) + "\n")
    return 0
