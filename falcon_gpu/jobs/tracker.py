"""Follow every container's use of every GPU, cycle by cycle, and close jobs into records.

Fed once per cycle with the snapshot, the attribution and the health reports
(:meth:`JobTracker.observe`). A job opens in the first cycle that sees the
container's processes on a GPU (or MIG instance) and closes in the first cycle
that does not (job done, pod deleted, GPU lost); its record then ends at the
last cycle that saw it. Energy is the sum of the container's attributed energy
increments (the ``falcon_gpu_pod_energy_joules_total`` counter) over the job's
cycles; XIDs, ECC increments and health changes are those of the job's GPU from
its second cycle up to the cycle that saw it gone; throttling is each active
clock event reason times the time between the job's cycles.

A cycle with no information changes nothing — closing every job on it would
split them: NVML failed, attribution failed, no GPU process was visible under
``proc_root``, or neither the kubelet nor the log dirs have answered yet (the
first cycle after a start can come before the first lookup). Open jobs are saved when they change
and every ``save_every`` cycles, and at :meth:`close`; a job restored at start
continues if its container is still on the GPU (one record across the restart)
and is closed at its last-seen time if not. Memory is bounded by the jobs
running now, the counters seen in the last :data:`TOTALS_RETENTION` seconds and
:data:`MAX_GROUPS` pods' latest records.

A Slurm job is followed the same way, per GPU (its steps added up: :func:`slurm_usage`), for
right-sizing advice by the job's name; its records have no namespace, pod or container, carry
``slurm_job``, and belong to no Pushgateway group (at most :data:`MAX_GROUPS` of them are kept as
the latest).
"""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

import msgspec

from falcon_gpu.carbon import emissions_grams
from falcon_gpu.jobs.open_job import JobKey, OpenJob, slurm_key
from falcon_gpu.jobs.records_file import JobLog
from falcon_gpu.jobs.state import StateFile
from falcon_gpu.model.attribution import Attribution, ContainerRef, PodUsage, SlurmJobUsage
from falcon_gpu.model.cycle import HealthReport
from falcon_gpu.model.jobs import HEALTH_NAMES, HealthChange, JobGroup, JobRecord
from falcon_gpu.model.snapshot import DeviceReading, Snapshot
from falcon_gpu.model.telemetry import Telemetry

log = logging.getLogger(__name__)

SAVE_EVERY = 10
TOTALS_RETENTION = 900.0
"""Longer than the energy ledger keeps an idle counter (600 s), so a container that comes
back to a GPU continues from the counter's last value instead of counting it twice."""
MAX_GROUPS = 256
STEP_TOLERANCE_S = 1.0
"""A change of wall minus monotonic time below this is no step (NTP slews both clocks alike)."""


@dataclass(frozen=True, slots=True)
class JobsUpdate:
    finished: tuple[JobRecord, ...] = ()
    groups: tuple[JobGroup, ...] = ()
    """The latest records of every pod that finished a job this cycle (Pushgateway groups)."""


NO_JOBS = JobsUpdate()


@dataclass
class _Interval:
    """What happened on one GPU since the previous cycle."""

    xids: dict[int, int] = field(default_factory=dict)
    ecc: tuple[int, int] = (0, 0)
    changes: list[HealthChange] = field(default_factory=list)
    reasons: frozenset[str] = frozenset()


@dataclass
class _GpuState:
    checks: dict[str, int]
    ecc: tuple[int | None, int | None]


def _ecc(dev: DeviceReading) -> tuple[int | None, int | None]:
    e = dev.ecc
    if e is None:
        return (None, None)
    corrected = e.corrected_volatile if e.corrected_volatile is not None else e.corrected_aggregate
    uncorrected = e.uncorrected_volatile if e.uncorrected_volatile is not None else e.uncorrected_aggregate
    return (corrected, uncorrected)


def _grown(now: int | None, before: int | None) -> int:
    return max(0, now - before) if now is not None and before is not None else 0


def _level(n: int) -> str:
    return HEALTH_NAMES[n] if 0 <= n < len(HEALTH_NAMES) else str(n)


def attribution_known(att: Attribution) -> bool:
    """Whether this cycle's attribution can say which containers run (see the module docstring)."""
    ok = att.sources_ok
    if not ok or ok.get("cgroup") is False:
        return False
    names = [ok[k] for k in ("kubelet", "logs") if k in ok]
    return not names or any(names)


def uses(attribution: Attribution) -> Iterator[tuple[JobKey, PodUsage]]:
    """Each container's use of each GPU, then each Slurm job's (its steps added up) in the same shape."""
    for use in attribution.pods:
        c = use.container
        yield (c.namespace, c.pod, c.container, use.gpu_uuid, use.mig_uuid), use
    steps: dict[JobKey, list[SlurmJobUsage]] = {}
    for step in attribution.slurm_jobs:
        steps.setdefault(slurm_key(step.job, step.gpu_uuid, step.mig_uuid), []).append(step)
    for key, of_job in steps.items():
        yield key, slurm_usage(key, of_job)


def slurm_usage(key: JobKey, steps: list[SlurmJobUsage]) -> PodUsage:
    """A Slurm job's steps on one GPU as one container's use; its workload is the job's name (the
    id where none was readable), carried as the owner."""
    utils = [s.utilization_ratio for s in steps]
    energies = [s.energy_joules_total for s in steps]
    first = steps[0]
    return PodUsage(
        container=ContainerRef("", key[1], "", owner=first.name or first.job),
        gpu_uuid=first.gpu_uuid,
        mig_uuid=first.mig_uuid,
        memory_used_bytes=sum(s.memory_used_bytes for s in steps),
        utilization_ratio=None if None in utils else sum(u or 0.0 for u in utils),
        processes=sum(s.processes for s in steps),
        energy_joules_total=None if None in energies else sum(e or 0.0 for e in energies),
    )


class JobTracker:
    def __init__(
        self,
        node: str,
        records: JobLog,
        state: StateFile,
        telemetry: Telemetry,
        *,
        save_every: int = SAVE_EVERY,
        carbon_intensity: float | None = None,
    ) -> None:
        """``carbon_intensity``: gCO2e per kWh, when the setting is a number: each record carries
        its emissions (:func:`falcon_gpu.carbon.emissions_grams`)."""
        self.node, self._log, self._state, self._telemetry = node, records, state, telemetry
        self._save_every = save_every
        self._intensity = carbon_intensity
        self._groups: OrderedDict[tuple[str, str], dict[tuple[str, str, str | None], JobRecord]] = (
            OrderedDict()
        )
        self._slurm: OrderedDict[tuple[str, str, str | None], JobRecord] = OrderedDict()
        """Slurm jobs' latest records (no Pushgateway group: a Slurm job is no pod)."""
        saved, recent = state.load()
        self._open: dict[JobKey, OpenJob] = {job.key: job for job in saved}
        self._restored = set(self._open)
        for record in recent:
            self._remember(record)
        self._totals: dict[JobKey, tuple[float, float]] = {}
        self._gpus: dict[str, _GpuState] = {}
        self._since_save = 0
        self._dirty = False
        self._offset: float | None = None
        """Wall minus monotonic time at the last cycle (None before the first)."""

    @property
    def open_jobs(self) -> int:
        return len(self._open)

    def recent(self) -> list[JobRecord]:
        """The pods' latest records (those restored at start included)."""
        return [r for slots in self._groups.values() for r in slots.values()] + list(self._slurm.values())

    def running(self) -> list[JobRecord]:
        """Each open job as the record it would close into now (for right-sizing advice)."""
        return [job.close() for job in self._open.values()]

    def observe(
        self,
        snapshot: Snapshot,
        attribution: Attribution,
        health: dict[str, HealthReport],
        *,
        monotonic: float | None = None,
    ) -> JobsUpdate:
        """One cycle; never raises (a bug here must not cost the cycle its metrics). ``monotonic``:
        the monotonic clock at the snapshot (None: the snapshot's timestamp, a replay)."""
        try:
            if monotonic is not None:
                self._follow_wall_clock(snapshot.timestamp - monotonic)
            update = self._observe(snapshot, attribution, health)
        except Exception as exc:
            self._telemetry.failing("jobs", "jobs", f"job records: unexpected error: {exc!r}")
            log.debug("job tracker failure", exc_info=True)
            return NO_JOBS
        self._telemetry.recovered("jobs", "job records work again")
        return update

    def _follow_wall_clock(self, offset: float) -> None:
        """Durations on the monotonic clock: when the wall clock stepped (its offset from the
        monotonic clock moved), every open job's times move with it, so that ``end - start`` and the
        throttled seconds count the time that passed, and ``start``/``end`` read on today's clock."""
        before, self._offset = self._offset, offset
        if before is None or abs(offset - before) < STEP_TOLERANCE_S:
            return
        step = offset - before
        for job in self._open.values():
            job.start += step
            job.last_seen += step
        self._totals = {k: (energy, at + step) for k, (energy, at) in self._totals.items()}
        self._dirty = True  # the agent's loop logs the step

    def _observe(
        self, snapshot: Snapshot, attribution: Attribution, health: dict[str, HealthReport]
    ) -> JobsUpdate:
        if not snapshot.nvml_ok or not attribution_known(attribution):
            return NO_JOBS  # nothing is known this cycle: keep every job as it is
        now = snapshot.timestamp
        devices = {d.uuid: d for d in snapshot.devices}
        intervals = {uuid: self._interval(d, health.get(uuid), now) for uuid, d in devices.items()}
        running: dict[JobKey, PodUsage] = {}
        baselines: dict[JobKey, float] = {}
        for key, use in uses(attribution):
            if (seen := self._totals.get(key)) is not None:
                baselines[key] = seen[0]
            if use.energy_joules_total is not None:  # absent where NVML gives no utilisation to share by
                self._totals[key] = (use.energy_joules_total, now)
            if use.processes > 0:
                running[key] = use
        finished: list[JobRecord] = []
        for key, job in list(self._open.items()):
            if key in running:
                continue
            if key not in self._restored and (iv := intervals.get(key[3])) is not None:
                job.device_events(iv.xids, iv.ecc, iv.changes)  # the interval in which it ended
            finished.append(self._with_emissions(job.close()))
            del self._open[key]
        alone = Counter(key[3] for key in running if key[4] is None)
        for key, use in running.items():
            if (dev := devices.get(use.gpu_uuid)) is not None:
                gpm = (
                    dev.gpm.sm_active
                    if dev.gpm is not None and key[4] is None and alone[key[3]] == 1
                    else None
                )
                self._sample(key, use, dev, intervals[dev.uuid], baselines.get(key, 0.0), now, gpm)
        self._restored.clear()
        self._write(finished)
        groups = self._touch_groups(finished)
        self._maybe_save(now, changed=bool(finished))
        return JobsUpdate(tuple(finished), groups) if finished else NO_JOBS

    def _sample(
        self,
        key: JobKey,
        use: PodUsage,
        dev: DeviceReading,
        iv: _Interval,
        baseline: float,
        now: float,
        gpm_sm_active: float | None = None,
    ) -> None:
        job = self._open.get(key)
        if job is None:
            job = OpenJob.first_seen(key, self.node, use, dev, now, baseline)
            self._open[key] = job
            self._dirty = True
        elif key not in self._restored:
            job.device_events(iv.xids, iv.ecc, iv.changes)
            job.throttle(iv.reasons, now - job.last_seen)
        util = None if use.utilization_ratio is None else min(1.0, use.utilization_ratio)
        job.sample(now, use.memory_used_bytes, util, use.energy_joules_total, gpm_sm_active)

    def _interval(self, dev: DeviceReading, report: HealthReport | None, now: float) -> _Interval:
        checks = dict(report.checks) if report is not None else {}
        ecc = _ecc(dev) if dev.up else (None, None)
        before = self._gpus.get(dev.uuid)
        self._gpus[dev.uuid] = _GpuState(checks, ecc if dev.up else (before.ecc if before else (None, None)))
        if before is None:
            return _Interval(reasons=dev.clock_event_reasons or frozenset())
        changes = [
            HealthChange(name, _level(before.checks[name]), _level(level), now)
            for name, level in checks.items()
            if name in before.checks and before.checks[name] != level
        ]
        return _Interval(
            xids=dict(report.xid_in_interval) if report is not None else {},
            ecc=(_grown(ecc[0], before.ecc[0]), _grown(ecc[1], before.ecc[1])),
            changes=changes,
            reasons=(dev.clock_event_reasons or frozenset()) if dev.up else frozenset(),
        )

    def _with_emissions(self, record: JobRecord) -> JobRecord:
        if self._intensity is None:
            return record
        return msgspec.structs.replace(
            record, emissions_grams=emissions_grams(record.energy_joules, self._intensity)
        )

    def _write(self, finished: list[JobRecord]) -> None:
        if not finished:
            return
        try:
            self._log.append(finished)
        except OSError as exc:
            self._telemetry.failing(
                "jobs:write",
                "jobs",
                f"job records: cannot write under {self._log.directory}: {exc}; "
                "the records still go to the sinks",
            )
        else:
            self._telemetry.recovered("jobs:write", "job records: writing records again")

    def _remember(self, record: JobRecord) -> None:
        if record.slurm_job is not None:
            self._slurm[record.slot] = record
            self._slurm.move_to_end(record.slot)
            while len(self._slurm) > MAX_GROUPS:
                self._slurm.popitem(last=False)
            return
        slots = self._groups.setdefault(record.group, {})
        slots[record.slot] = record
        self._groups.move_to_end(record.group)
        while len(self._groups) > MAX_GROUPS:
            self._groups.popitem(last=False)

    def _touch_groups(self, finished: list[JobRecord]) -> tuple[JobGroup, ...]:
        for record in finished:
            self._remember(record)
        touched = dict.fromkeys(r.group for r in finished if r.slurm_job is None)
        return tuple(JobGroup(ns, pod, tuple(self._groups[(ns, pod)].values())) for ns, pod in touched)

    def _maybe_save(self, now: float, *, changed: bool) -> None:
        self._dirty |= changed
        self._since_save += 1
        due = self._since_save >= self._save_every
        if due:  # forget counters of containers gone for good, whether or not a job is open
            cutoff = now - TOTALS_RETENTION
            self._totals = {k: v for k, v in self._totals.items() if v[1] >= cutoff}
        if self._dirty or (due and self._open):
            self.save()
        elif due:
            self._since_save = 0

    def save(self) -> None:
        """Write the open jobs and the pods' latest records (tmp + rename). Never raises."""
        self._since_save, self._dirty = 0, False
        recent = self.recent()
        try:
            self._state.save(list(self._open.values()), recent)
        except OSError as exc:
            self._telemetry.failing(
                "jobs:state", "jobs", f"job records: cannot save the open jobs to {self._state.path}: {exc}"
            )
        else:
            self._telemetry.recovered("jobs:state", "job records: saving the open jobs again")

    def close(self) -> None:
        """At shutdown: save the open jobs so that the next start continues them."""
        self.save()
