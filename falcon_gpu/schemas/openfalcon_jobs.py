"""Job records as Open-Falcon items (CONTRACT section 8), in the cycle that wrote them.

``JobEnergy`` (J), ``JobDuration`` (s), ``JobMaxFBUsed`` (MiB), ``JobAvgGPUUtils``
(%, left out when NVML gave no utilisation), tagged like the per-pod items:
``GpuId`` (and ``gi`` on a MIG instance), ``namespace``, ``pod``, ``container``.
A falcon strategy on ``JobEnergy`` sees one point per finished job. A Slurm job's record (no
pod to tag it with) is left out: it is in the records file and the right-sizing advice.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from falcon_gpu.readings.units import BYTES, MIB, PERCENT, RATIO, converter

if TYPE_CHECKING:  # types only: the plugin's start-up does not build the record classes
    from falcon_gpu.model.jobs import JobRecord

_TO_MIB, _TO_PERCENT = converter(BYTES, MIB), converter(RATIO, PERCENT)
Item = tuple[str, float | None, list[tuple[str, str]]]
METRICS = ("JobEnergy", "JobDuration", "JobMaxFBUsed", "JobAvgGPUUtils")
"""The metrics :func:`items` sends, in its order."""


def items(records: tuple[JobRecord, ...]) -> Iterator[Item]:
    """(metric, value, tags) for each record; the Open-Falcon schema formats them."""
    for r in records:
        if r.slurm_job is not None:
            continue
        tags = [("GpuId", str(r.gpu_index))]
        if r.gpu_instance is not None:
            tags.append(("gi", str(r.gpu_instance)))
        tags += [("namespace", r.namespace), ("pod", r.pod), ("container", r.container)]
        util = r.utilization_mean_ratio
        yield "JobEnergy", r.energy_joules, tags
        yield "JobDuration", r.duration_seconds, tags
        yield "JobMaxFBUsed", _TO_MIB(r.memory_max_bytes), tags
        yield "JobAvgGPUUtils", None if util is None else _TO_PERCENT(util), tags
