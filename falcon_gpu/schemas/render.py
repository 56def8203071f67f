"""Render one cycle lazily: each schema runs at most once, and only if a sink wants it."""

from __future__ import annotations

from functools import cached_property
from typing import Literal

from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.samples import FalconItem, PromBatch, PromGroup
from falcon_gpu.schemas import openfalcon


class RenderedCycle:
    """Implements :class:`falcon_gpu.sinks.base.Rendered`."""

    def __init__(self, cycle: CycleData, schema: Literal["falcon_gpu", "dcgm"] = "falcon_gpu") -> None:
        self.cycle = cycle
        self._schema = schema

    @cached_property
    def prometheus(self) -> PromBatch:
        from falcon_gpu.schemas import dcgm, falcon_gpu  # here: the plugin renders Open-Falcon only

        return dcgm.render(self.cycle) if self._schema == "dcgm" else falcon_gpu.render(self.cycle)

    @cached_property
    def falcon(self) -> tuple[FalconItem, ...]:
        return openfalcon.render(self.cycle)

    @cached_property
    def job_groups(self) -> tuple[PromGroup, ...]:
        """Pushgateway groups of the pods that finished a job this cycle (same names in both schemas)."""
        from falcon_gpu.schemas import falcon_gpu_jobs

        return falcon_gpu_jobs.render(self.cycle.job_groups, self.cycle.snapshot.timestamp)
