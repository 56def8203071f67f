"""The GPM reader: each GPU's and each MIG GPU instance's GPM metrics since the previous cycle.

The samples and their lifetime are :class:`~falcon_gpu.sources.nvml.gpm.GpmSamples`' (the
source owns it); this reader takes one sample per GPU and per GPU instance each cycle.

MIG: NVML gives no per-process utilisation on a MIG-enabled GPU, so the processes of an
instance take their SM share from the instance's GPM SM activity, split by their memory (one
process, or one container's processes, get all of it): that is what makes
``falcon_gpu_pod_utilization_ratio`` (and the per-pod energy, shared by SM share) work on MIG.
Runs after ``mig`` (it needs the instances and their processes).
"""

from __future__ import annotations

from dataclasses import replace

from falcon_gpu.model.snapshot import GpmReading, MigReading, ProcessReading
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields


def _instance_gpm(ctx: DeviceContext, instances: tuple[MigReading, ...]) -> tuple[MigReading, ...]:
    """Each instance with its GPU instance's GPM reading (compute instances share theirs)."""
    by_gi: dict[int, GpmReading | None] = {}
    for mig in instances:
        gi = mig.gpu_instance_id
        if gi not in by_gi:
            by_gi[gi] = ctx.gpm.sample(
                f"{ctx.scope}/gi{gi}", "nvmlGpmMigSampleGet", ctx.handle, gi, parent=ctx.scope
            )
    ctx.gpm.retain(ctx.scope, {f"{ctx.scope}/gi{gi}" for gi in by_gi})
    return tuple(m if by_gi[m.gpu_instance_id] is None else replace(m, gpm=by_gi[m.gpu_instance_id])
                 for m in instances)  # fmt: skip


def _shared(processes: tuple[ProcessReading, ...], active: float) -> dict[int, float]:
    """PID -> its part of an instance's SM activity, by memory (equal parts where none is known)."""
    memory = [p.used_memory_bytes or 0 for p in processes]
    total = sum(memory)
    if total <= 0:
        return {p.pid: active / len(processes) for p in processes}
    return {p.pid: active * m / total for p, m in zip(processes, memory, strict=True)}


def _with_instance_shares(
    instances: tuple[MigReading, ...], processes: tuple[ProcessReading, ...]
) -> tuple[tuple[MigReading, ...], tuple[ProcessReading, ...] | None]:
    """Instance processes without an SM share take their part of the instance's SM activity;
    the device's process list (None: unchanged) gets the same shares."""
    shares: dict[tuple[int, int], float] = {}
    out: list[MigReading] = []
    for mig in instances:
        active = mig.gpm.sm_active if mig.gpm is not None else None
        if active is None or not mig.processes or any(p.sm_util_ratio is not None for p in mig.processes):
            out.append(mig)
            continue
        split = _shared(mig.processes, active)
        for pid, share in split.items():
            shares[(pid, mig.gpu_instance_id)] = share
        out.append(
            replace(mig, processes=tuple(replace(p, sm_util_ratio=split[p.pid]) for p in mig.processes))
        )
    if not shares:
        return tuple(out), None
    merged = tuple(
        p if p.sm_util_ratio is not None or p.gpu_instance_id is None
        or (key := (p.pid, p.gpu_instance_id)) not in shares else replace(p, sm_util_ratio=shares[key])
        for p in processes
    )  # fmt: skip
    return tuple(out), merged


def read_gpm(ctx: DeviceContext) -> Fields:
    if not ctx.gpm.supported(ctx.scope, ctx.handle):
        return {}
    out: Fields = {"gpm": ctx.gpm.sample(ctx.scope, "nvmlGpmSampleGet", ctx.handle)}
    instances = ctx.fields.get("mig", ())
    if instances:
        mig, processes = _with_instance_shares(_instance_gpm(ctx, instances), ctx.fields.get("processes", ()))
        out["mig"] = mig
        if processes is not None:
            out["processes"] = processes
    return out
