"""``falcon_gpu_carbon_intensity_grams_per_kwh``: the ``carbon_intensity`` setting, when a number.

One series per node (node labels only), so the recording rules can turn each namespace's, pod's
and Slurm job's energy into emissions with one join on ``cluster, node``; none when the setting
is unset or names a series in the store (:mod:`falcon_gpu.carbon`).
"""

from __future__ import annotations

from falcon_gpu.carbon.rules import INTENSITY_SERIES as INTENSITY
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec

SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(INTENSITY, "gauge", "The carbon_intensity setting: gCO2e per kWh of this node's grid."),
)


def add_carbon(b: FamilyBuilder, cycle: CycleData) -> None:
    if cycle.carbon_intensity is not None:
        b.add(INTENSITY, cycle.base_labels, cycle.carbon_intensity)
