"""Synthetic cycles for the job tracker: a snapshot, an attribution and health, built by hand."""

from __future__ import annotations

from pathlib import Path

from falcon_gpu.jobs.records_file import JobLog
from falcon_gpu.jobs.state import StateFile
from falcon_gpu.jobs.tracker import JobsUpdate, JobTracker
from falcon_gpu.model.attribution import Attribution, ContainerRef, PodUsage, SlurmJobUsage
from falcon_gpu.model.cycle import PASS, HealthReport
from falcon_gpu.model.snapshot import DeviceReading, EccCounts, MigReading, ProcessReading, Snapshot
from falcon_gpu.model.telemetry import Telemetry

UUID = "GPU-aaaa"
MIG = "MIG-bbbb"
OK = {"kubelet": True, "logs": True, "kube_api": False}


def use(
    container: str,
    *,
    memory: int = 0,
    util: float | None = 0.0,
    energy: float | None = 0.0,
    processes: int = 1,
    pod: str = "train-0",
    mig: str | None = None,
    gpu: str = UUID,
) -> PodUsage:
    return PodUsage(
        ContainerRef("ml", pod, container),
        gpu_uuid=gpu,
        mig_uuid=mig,
        memory_used_bytes=memory,
        utilization_ratio=util,
        processes=processes,
        energy_joules_total=energy,
    )


def device(
    *,
    util: float | None = 0.5,
    reasons: frozenset[str] = frozenset(),
    ecc: int = 0,
    mig: bool = False,
    uuid: str = UUID,
    index: int = 0,
) -> DeviceReading:
    return DeviceReading(
        index=index,
        uuid=uuid,
        name="NVIDIA H100 80GB HBM3",
        pci_bus_id="00000000:18:00.0",
        utilization_ratio=util,
        clock_event_reasons=reasons,
        ecc=EccCounts(corrected_volatile=ecc, uncorrected_volatile=0),
        mig_enabled=mig,
        mig=(MigReading(3, 0, "3g.40gb", MIG),) if mig else (),
        processes=(ProcessReading(1, sm_util_ratio=None if util is None else util),),
    )


class Feeder:
    """Feeds a tracker one cycle at a time, ``step`` seconds apart from t=1000."""

    def __init__(self, jobs_dir: Path, *, step: float = 10.0, save_every: int = 10) -> None:
        self.jobs_dir, self.step, self.now = jobs_dir, step, 1000.0
        self.telemetry = Telemetry()
        self.tracker = self.new_tracker(save_every)

    def new_tracker(self, save_every: int = 10) -> JobTracker:
        return JobTracker(
            "node-a", JobLog(self.jobs_dir), StateFile(self.jobs_dir), self.telemetry, save_every=save_every
        )

    def cycle(
        self,
        pods: list[PodUsage],
        *,
        devices: list[DeviceReading] | None = None,
        checks: dict[str, int] | None = None,
        xids: dict[int, int] | None = None,
        nvml_ok: bool = True,
        sources_ok: dict[str, bool] | None = None,
        slurm: tuple[SlurmJobUsage, ...] = (),
    ) -> JobsUpdate:
        devs = tuple(devices if devices is not None else [device()])
        snap = Snapshot(timestamp=self.now, nvml_ok=nvml_ok, devices=devs)
        ok = OK if sources_ok is None else sources_ok
        health = {d.uuid: HealthReport(dict(checks or {"xid": PASS}), dict(xids or {})) for d in devs}
        update = self.tracker.observe(
            snap,
            Attribution(pods=tuple(pods), slurm_jobs=slurm, sources_ok=ok),
            health,
        )
        self.now += self.step
        return update
