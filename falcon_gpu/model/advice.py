"""Right-sizing advice as values: a placement (a MIG profile, a time-sliced share or a whole GPU)
and one workload's advice. The cycle carries them (``CycleData.advice``) for the schemas;
:mod:`falcon_gpu.advice` computes them."""

from __future__ import annotations

from typing import Any

import msgspec


class Placement(msgspec.Struct, frozen=True, gc=False):
    name: str
    """A MIG profile (``1g.10gb``), a share (``shared-1/4``) or ``gpu``."""
    kind: str
    """``mig``, ``shared`` or ``gpu``."""
    fraction: float
    """Share of one GPU it takes."""


class Advice(msgspec.Struct, frozen=True, gc=False):
    namespace: str
    workload: str
    model: str
    pods: int
    jobs: int
    memory_peak_bytes: int
    memory_p95_bytes: int
    sm_p95_ratio: float | None
    duration_seconds: float
    running: bool
    held: float
    """GPUs it held at once (a MIG instance as its share of a GPU)."""
    placement: Placement
    recommended: float
    """GPUs it would hold on ``placement`` (more than ``held`` where its instance is too small)."""

    def as_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__struct_fields__ if k != "placement"}
        out["placement"] = self.placement.name
        out["placement_kind"] = self.placement.kind
        return out
