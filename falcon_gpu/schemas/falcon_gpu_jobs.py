"""Job records as Prometheus series (CONTRACT section 8): one Pushgateway group per pod.

A pod's group ``job=falcon_gpu_job/namespace/<ns>/pod/<pod>`` holds the latest
record of each of its containers on each GPU (the Pushgateway docs' one
recommended use: the result of a batch job). ``namespace`` and ``pod`` are
grouping labels, so the series carry only ``container`` and the device labels.
"""

from __future__ import annotations

from falcon_gpu.model.jobs import JobGroup, JobRecord
from falcon_gpu.model.samples import Labels, PromBatch, PromGroup
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec

JOB = "falcon_gpu_job"
P = "falcon_gpu_job_record_"

SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(
        P + "energy_joules", "gauge", "Energy attributed to the container over the job (sum of its shares)."
    ),
    MetricSpec(
        P + "duration_seconds", "gauge", "From the first to the last cycle that saw the job's processes."
    ),
    MetricSpec(
        P + "max_memory_bytes", "gauge", "Most GPU memory the container's processes used during the job."
    ),
    MetricSpec(P + "mean_utilization_ratio", "gauge", "Mean SM share of the container during the job."),
    MetricSpec(P + "end_timestamp_seconds", "gauge", "When the job was last seen (Unix seconds)."),
    MetricSpec(P + "emissions_grams", "gauge", "gCO2e of the job's energy at the carbon_intensity setting."),
)


def record_labels(r: JobRecord) -> Labels:
    base: Labels = (("node", r.node), ("gpu", str(r.gpu_index)), ("uuid", r.gpu_uuid), ("model", r.gpu_model))
    if r.mig_uuid is not None:
        gi = "" if r.gpu_instance is None else str(r.gpu_instance)
        base = (*base, ("gpu_instance", gi), ("mig_profile", r.mig_profile or ""), ("mig_uuid", r.mig_uuid))
    return (*base, ("container", r.container))


def group(g: JobGroup, timestamp_ms: int) -> PromGroup:
    b = FamilyBuilder(SPECS)
    for r in g.records:
        lb = record_labels(r)
        b.add(P + "energy_joules", lb, r.energy_joules)
        b.add(P + "duration_seconds", lb, r.duration_seconds)
        b.add(P + "max_memory_bytes", lb, r.memory_max_bytes)
        b.add(P + "mean_utilization_ratio", lb, r.utilization_mean_ratio)
        b.add(P + "end_timestamp_seconds", lb, r.end)
        b.add(P + "emissions_grams", lb, r.emissions_grams)  # None (no series) unless a number is set
    grouping = (("job", JOB), ("namespace", g.namespace), ("pod", g.pod))
    return PromGroup(grouping, PromBatch(timestamp_ms, b.families()))


def render(groups: tuple[JobGroup, ...], timestamp: float) -> tuple[PromGroup, ...]:
    ms = int(timestamp * 1000)
    return tuple(group(g, ms) for g in groups)
