"""``falcon_gpu_advice_*``: right-sizing advice per workload (:mod:`falcon_gpu.advice`).

One series of each per workload this node ran within ``advice_window``, labelled ``namespace``,
``workload``, ``model`` (the GPU model) and ``profile`` (the recommended placement: a MIG
profile of that model, ``shared-1/N`` or ``gpu``). ``held_gpus - recommended_gpus`` is what
taking the advice frees; the recording rules sum it per profile and model.
"""

from __future__ import annotations

from falcon_gpu.model.cycle import CycleData
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec

P = "falcon_gpu_advice_"

SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(P + "memory_peak_bytes", "gauge", "Most GPU memory the workload's jobs used."),
    MetricSpec(P + "memory_p95_bytes", "gauge", "Largest 95th percentile of GPU memory of its jobs."),
    MetricSpec(P + "sm_active_p95_ratio", "gauge", "95th percentile of the workload's SM share of its GPU."),
    MetricSpec(P + "held_gpus", "gauge", "GPUs the workload held at once (a MIG instance as its share)."),
    MetricSpec(P + "recommended_gpus", "gauge", "GPUs the workload would hold on the recommended placement."),
)


def add_advice(b: FamilyBuilder, cycle: CycleData) -> None:
    base = cycle.base_labels
    for a in cycle.advice:
        lb = (
            *base,
            ("namespace", a.namespace),
            ("workload", a.workload),
            ("model", a.model),
            ("profile", a.placement.name),
        )
        b.add(P + "memory_peak_bytes", lb, a.memory_peak_bytes)
        b.add(P + "memory_p95_bytes", lb, a.memory_p95_bytes)
        b.add(P + "sm_active_p95_ratio", lb, a.sm_p95_ratio)
        b.add(P + "held_gpus", lb, round(a.held, 6))
        b.add(P + "recommended_gpus", lb, round(a.recommended, 6))
