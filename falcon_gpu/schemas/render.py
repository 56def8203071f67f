"""Render one cycle lazily: each schema runs at most once, and only if a sink wants it."""

from __future__ import annotations

from functools import cached_property
from typing import Literal

from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.samples import FalconItem, PromBatch, PromGroup
from falcon_gpu.schemas import openfalcon

PromSchema = Literal["falcon_gpu", "dcgm", "nvidia_smi"]
"""The Prometheus schemas, by the name the ``schema`` setting takes."""


def render_prometheus(schema: PromSchema, cycle: CycleData) -> PromBatch:
    """One cycle in one Prometheus schema: the one place a schema name picks its renderer."""
    from falcon_gpu.schemas import dcgm, falcon_gpu, nvidia_smi  # here: the plugin renders Open-Falcon only

    if schema == "dcgm":
        return dcgm.render(cycle)
    if schema == "nvidia_smi":
        return nvidia_smi.render(cycle)
    return falcon_gpu.render(cycle)


class RenderedCycle:
    """Implements :class:`falcon_gpu.sinks.base.Rendered`."""

    def __init__(self, cycle: CycleData, schema: PromSchema = "falcon_gpu") -> None:
        self.cycle = cycle
        self._schema = schema

    @cached_property
    def prometheus(self) -> PromBatch:
        return render_prometheus(self._schema, self.cycle)

    @cached_property
    def falcon(self) -> tuple[FalconItem, ...]:
        return openfalcon.render(self.cycle)

    @cached_property
    def job_groups(self) -> tuple[PromGroup, ...]:
        """Pushgateway groups of the pods that finished a job this cycle (the same in every schema)."""
        from falcon_gpu.schemas import falcon_gpu_jobs

        return falcon_gpu_jobs.render(self.cycle.job_groups, self.cycle.snapshot.timestamp)
