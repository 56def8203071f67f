"""Everything the schemas need to render one cycle, gathered by the agent."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from falcon_gpu.model.attribution import Attribution
from falcon_gpu.model.policy import PolicyStatus
from falcon_gpu.model.samples import Labels
from falcon_gpu.model.snapshot import Snapshot
from falcon_gpu.model.telemetry import TelemetryView

if TYPE_CHECKING:  # types only: the plugin (no job records unless jobs_dir is set) never builds them
    from falcon_gpu.model.advice import Advice
    from falcon_gpu.model.jobs import JobGroup, JobRecord

PASS, WARN, FAIL = 0, 1, 2


class HealthReport(msgspec.Struct, frozen=True, gc=False):
    """One device's health: ``checks`` maps a check name to PASS/WARN/FAIL."""

    checks: dict[str, int]
    xid_in_interval: dict[int, int] = {}
    """XID events that arrived since the previous cycle, per XID code."""
    last_xid: int | None = None
    """The most recent XID seen since the agent started (dcgm-exporter's ``XID_ERRORS``)."""

    @property
    def overall(self) -> int:
        return max(self.checks.values(), default=PASS)


class CycleData(msgspec.Struct, frozen=True, gc=False):
    node: str
    step: int
    """Open-Falcon ``step``: the interval in whole seconds (the plugin uses 60)."""
    snapshot: Snapshot
    attribution: Attribution
    health: dict[str, HealthReport]
    """GPU uuid -> report."""
    telemetry: TelemetryView
    process_metrics: bool = False
    node_labels: Labels = ()
    """``node`` and the ``labels`` setting, built once at start: what every series starts with.
    Empty (tests that build a cycle by hand): just ``node``."""
    extra_labels: Labels = ()
    """The ``labels`` setting alone (Open-Falcon tags, the dcgm schema's device labels)."""
    policies: tuple[PolicyStatus, ...] = ()
    """Each policy on each GPU it watches (empty without ``[[policies]]``)."""
    jobs_finished: tuple[JobRecord, ...] = ()
    """Job records written this cycle (containers whose processes left a GPU)."""
    job_groups: tuple[JobGroup, ...] = ()
    """The latest records of each pod in ``jobs_finished`` (its whole Pushgateway group)."""
    carbon_intensity: float | None = None
    """gCO2e per kWh when the ``carbon_intensity`` setting is a number (:mod:`falcon_gpu.carbon`)."""
    advice: tuple[Advice, ...] = ()
    """Right-sizing advice per workload (with job records on; :mod:`falcon_gpu.advice.book`)."""

    @property
    def base_labels(self) -> Labels:
        """The labels every series of every schema starts with (CONTRACT section 4)."""
        return self.node_labels or (("node", self.node), *self.extra_labels)
