"""What one renderer keeps across cycles in one Prometheus schema.

A schema's previous families (:class:`~falcon_gpu.schemas.builder.FamilyMemo`) and its label tuples
per identity (:mod:`falcon_gpu.schemas.label_cache`) belong to the renderer that does the work
(:class:`~falcon_gpu.schemas.render.SchemaRenderer`: one per agent and schema), not to the process:
two agents in one process (tests, a reload) never share one, and the renderer's lock lets one
render at a time use them. A schema with label tuples of its own extends :class:`SchemaCaches`.
Every :data:`~falcon_gpu.schemas.render.SWEEP_EVERY` renders the renderer sweeps them: the label
tuples of identities that no render asked for since the sweep before go
(:mod:`falcon_gpu.schemas.label_cache`).
"""

from __future__ import annotations

from falcon_gpu.schemas.agent import AgentLabels
from falcon_gpu.schemas.builder import FamilyMemo
from falcon_gpu.schemas.falcon_gpu_device import DeviceLabelSets
from falcon_gpu.schemas.falcon_gpu_pod import PodLabels
from falcon_gpu.schemas.label_cache import Kept


class SchemaCaches(Kept):
    """The parts every Prometheus schema has: its memo, the device, pod and agent label tuples."""

    __slots__ = ("agent", "devices", "memo", "pods")

    def __init__(self) -> None:
        self.memo = FamilyMemo()
        self.devices = DeviceLabelSets()
        self.pods = PodLabels()
        self.agent = AgentLabels()
