"""The ``falcon_gpu`` Prometheus schema: device, pod and agent series of one cycle."""

from __future__ import annotations

from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.samples import PromBatch
from falcon_gpu.schemas import agent, falcon_gpu_device, falcon_gpu_pod, falcon_gpu_policy
from falcon_gpu.schemas.builder import FamilyBuilder
from falcon_gpu.schemas.kept import SchemaCaches
from falcon_gpu.schemas.selection import EVERYTHING, MetricSelection

SPECS = falcon_gpu_device.SPECS + falcon_gpu_policy.SPECS + falcon_gpu_pod.SPECS + agent.SPECS
Caches = SchemaCaches
"""What a renderer keeps across cycles in this schema (:mod:`falcon_gpu.schemas.kept`)."""


NAMES = tuple(spec.name for spec in SPECS)


def render(
    cycle: CycleData, selection: MetricSelection = EVERYTHING, kept: SchemaCaches | None = None
) -> PromBatch:
    """``kept``: the renderer's caches (None: fresh ones, nothing kept from a previous cycle)."""
    if kept is None:
        kept = SchemaCaches()
    b = FamilyBuilder(SPECS, kept.memo, selection.chosen(NAMES))
    falcon_gpu_device.add_devices(b, cycle, kept.devices)
    falcon_gpu_policy.add_policies(b, cycle, kept.devices)
    falcon_gpu_pod.add_pods(
        b, cycle, falcon_gpu_pod.DeviceIndex(cycle.snapshot.devices, kept.devices), kept.pods
    )
    agent.add_agent(b, cycle, kept.agent)
    return PromBatch(timestamp_ms=int(cycle.snapshot.timestamp * 1000), families=b.families())
