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

from msgspec.structs import replace

from falcon_gpu.model.snapshot import GpmReading, MigReading, ProcessReading
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields


def _instance_gpm(ctx: DeviceContext, instances: tuple[MigReading, ...]) -> tuple[MigReading, ...]:
    """Each instance with its GPU instance's GPM reading (compute instances share theirs)."""
    gpm = ctx.gpm
    by_gi: dict[int, GpmReading | None] = {}
    for mig in instances:
        gi = mig.gpu_instance_id
        if gi not in by_gi:
            scope = gpm.instance_scope(ctx.scope, gi)
            by_gi[gi] = gpm.sample(scope, "nvmlGpmMigSampleGet", ctx.handle, gi, parent=ctx.scope)
    gpm.retain(ctx.scope, {gpm.instance_scope(ctx.scope, gi) for gi in by_gi})
    return tuple(m if by_gi[m.gpu_instance_id] is None else replace(m, gpm=by_gi[m.gpu_instance_id])
                 for m in instances)  # fmt: skip


def _shared(processes: list[ProcessReading], active: float) -> dict[int, float]:
    """PID -> its part of an instance's SM activity, by memory (equal parts where none is known)."""
    memory = [p.used_memory_bytes or 0 for p in processes]
    total = sum(memory)
    if total <= 0:
        return {p.pid: active / len(processes) for p in processes}
    return {p.pid: active * m / total for p, m in zip(processes, memory, strict=True)}


def _instance_shares(instances: tuple[MigReading, ...]) -> dict[tuple[int, int], float]:
    """(PID, GPU instance) -> SM share, for the processes of instances with GPM SM activity and no
    share of their own; one GPU instance's activity is split over all its compute instances' processes."""
    active: dict[int, float] = {}
    processes: dict[int, list[ProcessReading]] = {}
    for mig in instances:
        sm = mig.gpm.sm_active if mig.gpm is not None else None
        if sm is None or any(p.sm_util_ratio is not None for p in mig.processes):
            continue
        active[mig.gpu_instance_id] = sm
        processes.setdefault(mig.gpu_instance_id, []).extend(mig.processes)
    return {
        (pid, gi): share
        for gi, procs in processes.items()
        if procs
        for pid, share in _shared(procs, active[gi]).items()
    }


def _with_share(
    processes: tuple[ProcessReading, ...], shares: dict[tuple[int, int], float], gi: int | None
) -> tuple[ProcessReading, ...]:
    """``processes`` with the shares of those that have none (``gi``: their instance, else their own)."""
    out = []
    for p in processes:
        instance = p.gpu_instance_id if gi is None else gi
        share = shares.get((p.pid, instance)) if p.sm_util_ratio is None and instance is not None else None
        out.append(p if share is None else replace(p, sm_util_ratio=share))
    return tuple(out)


NEEDS = ("mig", "processes")
"""The MIG instances and the processes, which the GPM shares are put on."""


def read_gpm(ctx: DeviceContext) -> Fields:
    if not ctx.gpm.supported(ctx.scope, ctx.handle):
        return {}
    out: Fields = {"gpm": ctx.gpm.sample(ctx.scope, "nvmlGpmSampleGet", ctx.handle)}
    instances = ctx.fields.get("mig", ())
    if instances:
        instances = _instance_gpm(ctx, instances)
        shares = _instance_shares(instances)
        if shares:
            instances = tuple(replace(m, processes=_with_share(m.processes, shares, m.gpu_instance_id))
                              for m in instances)  # fmt: skip
            out["processes"] = _with_share(ctx.fields.get("processes", ()), shares, None)
        out["mig"] = instances
    return out
