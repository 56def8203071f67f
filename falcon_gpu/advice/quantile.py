"""A job's p95 in bounded memory: counts per bucket, not samples.

Memory is bucketed on a log scale (each bucket 2 % wider than the one below, from 1 MiB), so a
job's p95 is known to 2 %, rounded up (advice must not be smaller than what ran); an SM share
in whole percent. A job whose use stays within a few percent fills a handful of buckets; the
worst case (use spread from 1 MiB to 1 TiB) is about 700, whatever the job's length.
"""

from __future__ import annotations

import math

_RATIO = 1.02
_LOG_RATIO = math.log(_RATIO)
_MIB = 1 << 20


def memory_bucket(used_bytes: int) -> int:
    """0 for up to 1 MiB; bucket ``n`` holds up to ``1 MiB x 1.02**n``."""
    if used_bytes <= _MIB:
        return 0
    return math.ceil(math.log(used_bytes / _MIB) / _LOG_RATIO - 1e-9)


def memory_bound(bucket: int) -> int:
    """The most bytes ``bucket`` holds."""
    return math.ceil(_MIB * _RATIO**bucket)


def ratio_bucket(ratio: float) -> int:
    """Whole percent, rounded up (0.121 -> 13)."""
    return max(0, math.ceil(round(ratio * 100, 6)))


def add(hist: dict[int, int], bucket: int) -> None:
    hist[bucket] = hist.get(bucket, 0) + 1


def quantile_bucket(hist: dict[int, int], q: float = 0.95) -> int | None:
    """The bucket holding the ``q`` quantile of the counted samples; None when there are none."""
    total = sum(hist.values())
    if total == 0:
        return None
    rank = math.ceil(q * total)
    seen = 0
    for bucket in sorted(hist):
        seen += hist[bucket]
        if seen >= rank:
            return bucket
    return max(hist)


def from_json(data: object) -> dict[int, int]:
    """A histogram saved as JSON (string keys); {} for anything else."""
    if not isinstance(data, dict):
        return {}
    return {int(k): int(v) for k, v in data.items()}
