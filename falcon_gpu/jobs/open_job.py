"""One job while it runs: running sums and maxima, folded into a :class:`JobRecord` at the end.

Memory is O(1) per job whatever its length (sums, not samples), except the
health changes, which are capped at :data:`MAX_HEALTH_CHANGES`. ``as_state`` /
``from_state`` are what :mod:`falcon_gpu.jobs.state` saves across a restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from falcon_gpu.advice import quantile
from falcon_gpu.advice.workload import workload_of
from falcon_gpu.model.jobs import HealthChange, JobRecord

if TYPE_CHECKING:
    from falcon_gpu.model.attribution import PodUsage
    from falcon_gpu.model.snapshot import DeviceReading

MAX_HEALTH_CHANGES = 64
JobKey = tuple[str, str, str, str, str | None]
"""(namespace, pod, container, GPU uuid, MIG uuid or None); a Slurm job's: :func:`slurm_key`."""


def slurm_key(job: str, gpu_uuid: str, mig_uuid: str | None) -> JobKey:
    """A Slurm job's key: no namespace (every pod has one), the job id in the pod's place."""
    return ("", job, "", gpu_uuid, mig_uuid)


def slurm_job_of(key: JobKey) -> str | None:
    """The Slurm job id of a :func:`slurm_key`; None for a pod's container."""
    return key[1] if not key[0] else None


@dataclass
class OpenJob:
    key: JobKey
    node: str
    gpu_index: int
    gpu_model: str
    start: float
    last_seen: float
    mig_profile: str | None = None
    gpu_instance: int | None = None
    energy_joules: float = 0.0
    energy_total: float = 0.0
    """The container's attributed energy counter at the last cycle (the baseline for the next)."""
    memory_max: int = 0
    memory_sum: float = 0.0
    cycles: int = 0
    util_sum: float = 0.0
    util_max: float = 0.0
    util_cycles: int = 0
    xids: dict[int, int] = field(default_factory=dict)
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    health_changes: list[HealthChange] = field(default_factory=list)
    throttled: dict[str, float] = field(default_factory=dict)
    restarts: int = 0
    workload: str | None = None
    memory_hist: dict[int, int] = field(default_factory=dict)
    """Cycles per memory bucket (:mod:`falcon_gpu.advice.quantile`), for the p95."""
    sm_hist: dict[int, int] = field(default_factory=dict)
    """Cycles per whole percent of SM activity (GPM where alone on a GPU with it, else SM share)."""
    slurm_job: str | None = None

    @classmethod
    def first_seen(
        cls, key: JobKey, node: str, use: PodUsage, dev: DeviceReading, now: float, energy_total: float = 0.0
    ) -> OpenJob:
        """The job of a container first seen on a GPU (or one of its MIG instances) at ``now``."""
        mig = next((m for m in dev.mig if m.uuid == use.mig_uuid), None)
        return cls(
            key=key,
            node=node,
            gpu_index=dev.index,
            gpu_model=dev.name,
            start=now,
            last_seen=now,
            mig_profile=mig.profile if mig else None,
            gpu_instance=mig.gpu_instance_id if mig else None,
            energy_total=energy_total,
            workload=workload_of(key[1], key[2], use.container.owner),
            slurm_job=slurm_job_of(key),
        )

    def sample(
        self,
        now: float,
        memory: int,
        util: float | None,
        energy_total: float | None,
        sm_active: float | None = None,
    ) -> None:
        """One cycle in which the container had processes on the GPU (``util`` and
        ``energy_total`` None: NVML gave no utilisation to share the energy by). ``sm_active``: the
        GPU's GPM SM activity where the container is alone on it (the p95 of right-sizing advice
        takes it over the utilisation share)."""
        if energy_total is not None:
            # the ledger counter only grows; smaller means it was restarted (agent restart, expiry)
            gained = energy_total - self.energy_total if energy_total >= self.energy_total else energy_total
            self.energy_joules += gained
            self.energy_total = energy_total
        self.memory_max = max(self.memory_max, memory)
        self.memory_sum += memory
        self.cycles += 1
        quantile.add(self.memory_hist, quantile.memory_bucket(memory))
        if (sm := util if sm_active is None else sm_active) is not None:
            quantile.add(self.sm_hist, quantile.ratio_bucket(sm))
        if util is not None:
            self.util_sum += util
            self.util_max = max(self.util_max, util)
            self.util_cycles += 1
        self.last_seen = now

    def device_events(self, xids: dict[int, int], ecc: tuple[int, int], changes: list[HealthChange]) -> None:
        """What happened on the job's GPU since the previous cycle."""
        for xid, n in xids.items():
            self.xids[xid] = self.xids.get(xid, 0) + n
        self.ecc_corrected += ecc[0]
        self.ecc_uncorrected += ecc[1]
        room = MAX_HEALTH_CHANGES - len(self.health_changes)
        self.health_changes.extend(changes[: max(0, room)])

    def throttle(self, reasons: frozenset[str], seconds: float) -> None:
        for reason in reasons:
            self.throttled[reason] = self.throttled.get(reason, 0.0) + seconds

    def close(self) -> JobRecord:
        namespace, pod, container, uuid, mig = self.key
        n = max(self.cycles, 1)
        util = self.util_cycles > 0
        memory_p95 = quantile.quantile_bucket(self.memory_hist)
        util_p95 = quantile.quantile_bucket(self.sm_hist)
        mem_p95 = None if memory_p95 is None else min(self.memory_max, quantile.memory_bound(memory_p95))
        return JobRecord(
            namespace=namespace,
            pod=pod if self.slurm_job is None else "",
            container=container,
            node=self.node,
            gpu_index=self.gpu_index,
            gpu_uuid=uuid,
            gpu_model=self.gpu_model,
            start=self.start,
            end=self.last_seen,
            energy_joules=round(self.energy_joules, 6),
            memory_max_bytes=self.memory_max,
            memory_mean_bytes=round(self.memory_sum / n),
            cycles=self.cycles,
            mig_uuid=mig,
            mig_profile=self.mig_profile,
            gpu_instance=self.gpu_instance,
            utilization_mean_ratio=round(self.util_sum / self.util_cycles, 6) if util else None,
            utilization_max_ratio=round(self.util_max, 6) if util else None,
            xids=dict(sorted(self.xids.items())),
            ecc_corrected=self.ecc_corrected,
            ecc_uncorrected=self.ecc_uncorrected,
            health_changes=tuple(self.health_changes),
            throttled_seconds={k: round(v, 3) for k, v in sorted(self.throttled.items())},
            restarts=self.restarts,
            workload=self.workload,
            memory_p95_bytes=mem_p95,
            sm_active_p95_ratio=None if util_p95 is None else min(1.0, util_p95 / 100),
            slurm_job=self.slurm_job,
        )

    def as_state(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("health_changes", "xids")}
        out["key"] = list(self.key)
        out["xids"] = {str(k): v for k, v in self.xids.items()}
        out["health_changes"] = [[h.check, h.before, h.after, h.at] for h in self.health_changes]
        return out

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> OpenJob:
        """A job saved by a previous run. Its energy baseline is 0: the new run's ledger starts
        from 0. Raises KeyError, TypeError or ValueError for an entry that is not a job."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        ns, pod, container, uuid, mig = data["key"]
        fields["key"] = (str(ns), str(pod), str(container), str(uuid), None if mig is None else str(mig))
        fields["xids"] = {int(k): int(v) for k, v in (data.get("xids") or {}).items()}
        fields["health_changes"] = [
            HealthChange(str(c), str(b), str(a), float(t)) for c, b, a, t in data.get("health_changes") or ()
        ]
        fields["throttled"] = {str(k): float(v) for k, v in (data.get("throttled") or {}).items()}
        fields["memory_hist"] = quantile.from_json(data.get("memory_hist"))
        fields["sm_hist"] = quantile.from_json(data.get("sm_hist"))
        job = cls(**fields)
        job.energy_total = 0.0
        job.restarts += 1
        if not all(isinstance(v, int | float) for v in (job.start, job.last_seen, job.energy_joules)):
            raise TypeError("start, last_seen and energy_joules must be numbers")
        return job
