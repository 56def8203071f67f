"""The ``falcon_gpu`` Prometheus schema: device, pod and agent series of one cycle."""

from __future__ import annotations

from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.samples import PromBatch
from falcon_gpu.schemas import (
    agent,
    falcon_gpu_advice,
    falcon_gpu_carbon,
    falcon_gpu_device,
    falcon_gpu_pod,
    falcon_gpu_policy,
    profiles,
)
from falcon_gpu.schemas.builder import FamilyBuilder
from falcon_gpu.schemas.kept import SchemaCaches
from falcon_gpu.schemas.selection import EVERYTHING, MetricSelection

SPECS = (
    falcon_gpu_device.SPECS
    + falcon_gpu_policy.SPECS
    + falcon_gpu_pod.SPECS
    + falcon_gpu_advice.SPECS
    + agent.SPECS
    + falcon_gpu_carbon.SPECS
)
Caches = SchemaCaches
"""What a renderer keeps across cycles in this schema (:mod:`falcon_gpu.schemas.kept`)."""


NAMES = tuple(spec.name for spec in SPECS)
LEAN = profiles.lean_set(NAMES)
"""The families of the default profile (:mod:`falcon_gpu.schemas.profiles`)."""


def render(
    cycle: CycleData, selection: MetricSelection = EVERYTHING, kept: SchemaCaches | None = None
) -> PromBatch:
    """``kept``: the renderer's caches (None: fresh ones, nothing kept from a previous cycle)."""
    if kept is None:
        kept = SchemaCaches()
    b = FamilyBuilder(SPECS, kept.memo, selection.chosen(NAMES, LEAN))
    falcon_gpu_device.add_devices(b, cycle, kept.devices, selection.sparse)
    falcon_gpu_policy.add_policies(b, cycle, kept.devices)
    falcon_gpu_pod.add_pods(
        b, cycle, falcon_gpu_pod.DeviceIndex(cycle.snapshot.devices, kept.devices), kept.pods
    )
    falcon_gpu_advice.add_advice(b, cycle)
    agent.add_agent(b, cycle, kept.agent)
    falcon_gpu_carbon.add_carbon(b, cycle)
    return PromBatch(timestamp_ms=int(cycle.snapshot.timestamp * 1000), families=b.families())
