"""A finished job: what ``dcgmi stats`` reports for a PID, here for one container on one GPU.

Immutable, and the same shape in memory, in the JSON-lines file and in the
saved state (:meth:`JobRecord.as_json` / :meth:`JobRecord.from_json`), so a
record read back by ``falcon-gpu stats`` is the record that was written. msgspec
turns a record into plain values and back (checking every field's type); the
JSON text itself is still written by :mod:`json`, whose escaping and number
format the files on disk have always had.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec

HEALTH_NAMES = ("pass", "warn", "fail")


def iso(ts: float) -> str:
    """UTC ISO 8601 with seconds, e.g. ``2026-12-01T09:00:00Z``."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class HealthChange(msgspec.Struct, frozen=True, gc=False, rename={"before": "from", "after": "to"}):
    """A health check of the job's GPU that changed level while the job ran (``from``/``to`` in JSON)."""

    check: str
    before: str
    after: str
    at: float


class JobRecord(msgspec.Struct, frozen=True, gc=False):
    namespace: str
    pod: str
    container: str
    node: str
    gpu_index: int
    gpu_uuid: str
    gpu_model: str
    start: float
    """Unix seconds of the first cycle that saw the container's processes on the GPU."""
    end: float
    """Unix seconds of the last cycle that saw them."""
    energy_joules: float
    """Sum of the container's attributed energy increments over the job's life."""
    memory_max_bytes: int
    memory_mean_bytes: int
    cycles: int
    mig_uuid: str | None = None
    mig_profile: str | None = None
    gpu_instance: int | None = None
    utilization_mean_ratio: float | None = None
    """Mean SM share; None when NVML gave no utilisation for the GPU (e.g. MIG)."""
    utilization_max_ratio: float | None = None
    xids: dict[int, int] = msgspec.field(default_factory=dict)
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    health_changes: tuple[HealthChange, ...] = ()
    throttled_seconds: dict[str, float] = msgspec.field(default_factory=dict)
    """Seconds each clock event reason was active while the job ran (reason x cycle time)."""
    restarts: int = 0
    """Agent restarts the job spanned."""
    emissions_grams: float | None = None
    """gCO2e of ``energy_joules`` at the ``carbon_intensity`` setting; None unless it is a number."""
    workload: str | None = None
    """What survives the pod's restarts (:mod:`falcon_gpu.advice.workload`); None in records
    written before it was kept (readers derive it from the pod name)."""
    memory_p95_bytes: int | None = None
    """95th percentile of the per-cycle memory, known to 2 %, rounded up (never above the max)."""
    sm_active_p95_ratio: float | None = None
    """95th percentile of the per-cycle SM activity, in whole percent rounded up: the GPU's GPM SM
    activity in cycles where the container was alone on a GPU that has GPM, else its SM share (on a
    MIG instance: of the instance)."""
    slurm_job: str | None = None
    """The Slurm job id of a Slurm job's record (then ``namespace``, ``pod`` and ``container`` are
    empty and ``workload`` is the job's name, else its id); None for a pod's container."""

    @property
    def duration_seconds(self) -> float:
        """To the millisecond, so the file, the Pushgateway and Open-Falcon show one value."""
        return round(max(0.0, self.end - self.start), 3)

    @property
    def group(self) -> tuple[str, str]:
        return (self.namespace, self.pod)

    @property
    def slot(self) -> tuple[str, str, str | None]:
        """Which of the pod's jobs this is (a Slurm job's: its id in the container's place): a newer
        record of the same slot replaces it."""
        return (self.container if self.slurm_job is None else self.slurm_job, self.gpu_uuid, self.mig_uuid)

    def as_json(self) -> dict[str, Any]:
        """Every field (XID keys as text, a health change's levels as ``from``/``to``) and the derived
        duration and ISO times, for readers of the file."""
        out: dict[str, Any] = msgspec.to_builtins(self, str_keys=True)
        out["duration_seconds"] = self.duration_seconds
        out["start_iso"], out["end_iso"] = iso(self.start), iso(self.end)
        return out

    @classmethod
    def from_json(cls, data: Any) -> JobRecord:
        """What :meth:`as_json` gave, or a record of an earlier version (fields it lacks take their
        defaults; the derived ones are ignored). Raises ValueError (msgspec's ValidationError) for
        anything that is not a record."""
        return msgspec.convert(data, cls, strict=False, str_keys=True)


class JobGroup(msgspec.Struct, frozen=True, gc=False):
    """A pod's latest record per (container, GPU): what its Pushgateway group must hold,
    since a PUT replaces the whole group."""

    namespace: str
    pod: str
    records: tuple[JobRecord, ...]
