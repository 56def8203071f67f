"""MIG: mode, and each populated instance with its memory and processes.

The MIG mode and the slot count change only with an administrator's reconfiguration
(which needs the GPU idle, often a reset): they are re-read once a minute
(:mod:`falcon_gpu.sources.nvml.slow`). MIG device handles are looked up by slot up to
``nvmlDeviceGetMaxMigDeviceCount``; empty slots answer NOT_FOUND and are skipped. The
profile is the suffix of the MIG device name (``"NVIDIA A100-SXM4-40GB MIG 1g.5gb"`` ->
``"1g.5gb"``). NVML reports no per-process utilisation for a MIG handle, so instance
processes take the SM share the parent's samples gave their PID. Processes listed only
by an instance handle are added to the device's process list (with instance ids), so
``DeviceReading.processes`` holds every instance's processes.

**The layout is kept.** Each instance's handle, UUID, GPU and compute instance IDs and
profile (:class:`MigSlot`) only change when an administrator creates or destroys an
instance (``nvidia-smi mig -cgi/-dci``, which needs MIG on and no process on that
instance); NVML has no event for it. So the slots are enumerated (4 calls per instance and
one per slot: 23 for four instances on seven slots) once, and again when

- the MIG mode changed (read once a minute, and at once when a kept handle fails, below;
  MIG off drops the layout),
- a minute has passed (:data:`~falcon_gpu.sources.nvml.slow.REFRESH_S`): an instance created
  since shows within 60 s, the promise of every slow reading,
- a kept handle's memory info (the one call every instance makes every cycle) fails although
  NVML supports it there: a destroyed instance's handle answers NOT_FOUND or
  INVALID_ARGUMENT. The MIG mode, slot count and layout are then read again in the same
  cycle: MIG off means no instances (the source logs the mode change); an instance missing
  from the new layout is gone (logged once, at info: it is a reconfiguration, not a failure,
  so its failed call is not counted); one still there failed for real (counted as usual);
- the devices were looked up again (the source forgets every slow reading), or an instance
  read answered GPU_IS_LOST (a GPU lost in its own reads comes back with kept handles, which
  the rule above checks the first cycle it answers).

What a user sees in the worst case: a new instance appears up to 60 s late (as a changed
power limit does); a destroyed one disappears the cycle its memory info fails, which is
the first cycle after it is destroyed (at the latest, the minute's enumeration). Left every
cycle per instance: memory info, the process lists (the MPS list behind its gate) and the
GPM MIG sample.

Each GPU instance's placement start (``nvmlDeviceGetGpuInstanceById`` then
``nvmlGpuInstanceGetInfo``, ``placement.start``) tells two instances of one profile
apart: NVIDIA's DRA driver names a MIG device by profile and placement. It changes
only with the MIG layout, so it is re-read with the slow fields. NVML wants a
privileged user for it; NO_PERMISSION leaves it unknown, quietly (the DRA mapping then
falls back to the profile alone, see :mod:`falcon_gpu.attribution.device_index`).
"""

from __future__ import annotations

import logging
from types import MappingProxyType
from typing import Any, Final

import msgspec
import pynvml
from msgspec.structs import replace

from falcon_gpu.model.snapshot import MigReading, ProcessReading
from falcon_gpu.sources.nvml.calls import ABSENT, DeviceGone, text
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields
from falcon_gpu.sources.nvml.readers.memory import memory_info
from falcon_gpu.sources.nvml.readers.processes import list_processes

log = logging.getLogger("falcon_gpu.nvml")

MIG_NAME_MARK = " MIG "
LAYOUT: Final = "mig_layout"
"""The kept layout's key in :class:`~falcon_gpu.sources.nvml.slow.SlowReadings`."""
_VIEW: Final = (LAYOUT, "mig_mode", "mig_count")
"""Everything kept about a GPU's MIG state: read again when a kept handle stops answering."""


def profile_from_name(name: str) -> str:
    return name.rsplit(MIG_NAME_MARK, 1)[1].strip() if MIG_NAME_MARK in name else ""


class MigSlot(msgspec.Struct, frozen=True):  # collected: holds an NVML handle object
    """One populated MIG slot: what stays true until the instance is destroyed."""

    slot: int
    handle: Any
    uuid: str
    gpu_instance_id: int | None
    compute_instance_id: int | None
    profile: str


def _enumerate(ctx: DeviceContext) -> tuple[MigSlot, ...]:
    """Every populated slot's handle and identity (the calls the kept layout saves)."""
    nvml, scope, h = ctx.nvml, ctx.scope, ctx.handle
    count = ctx.slow.call(nvml, ctx.timestamp, scope, "mig_count", "nvmlDeviceGetMaxMigDeviceCount", h)
    slots: list[MigSlot] = []
    for slot in range(0 if count is ABSENT else int(count)):
        handle = nvml.call(scope, "mig_handle", "nvmlDeviceGetMigDeviceHandleByIndex", h, slot)
        if handle is ABSENT:
            continue
        uuid = nvml.call(scope, "mig_uuid", "nvmlDeviceGetUUID", handle)
        if uuid is ABSENT:
            continue
        mig = text(uuid)
        gi = nvml.call(mig, "gpu_instance_id", "nvmlDeviceGetGpuInstanceId", handle)
        ci = nvml.call(mig, "compute_instance_id", "nvmlDeviceGetComputeInstanceId", handle)
        name = nvml.call(mig, "name", "nvmlDeviceGetName", handle)
        profile = profile_from_name(text(name)) if name is not ABSENT else ""
        slots.append(MigSlot(slot, handle, mig, _int(gi), _int(ci), profile))
    ctx.state.note_instances(scope, tuple(s.uuid for s in slots))  # a destroyed one's state goes
    return tuple(slots)


def _layout(ctx: DeviceContext) -> tuple[MigSlot, ...]:
    layout: tuple[MigSlot, ...] = ctx.slow.kept(ctx.nvml, ctx.timestamp, ctx.scope, LAYOUT, _enumerate, ctx)
    return layout


def _mig_on(ctx: DeviceContext) -> bool:
    mode = ctx.slow.call(ctx.nvml, ctx.timestamp, ctx.scope, "mig_mode", "nvmlDeviceGetMigMode", ctx.handle)
    return mode is not ABSENT and int(mode[0]) == pynvml.NVML_DEVICE_MIG_ENABLE


def _instances(ctx: DeviceContext) -> list[MigReading] | None:
    """This cycle's readings of the kept layout's instances, less those found destroyed; None when
    a kept handle's failure showed MIG turned off."""
    errors, slow, scope = ctx.nvml.errors, ctx.slow, ctx.scope
    fresh: dict[str, MigSlot] | None = None
    out: list[MigReading] = []
    for s in _layout(ctx):
        before = len(errors)
        memory = memory_info(ctx, s.handle, s.uuid)
        if memory is ABSENT and ctx.nvml.supported(s.uuid, "memory_info"):
            failed = len(errors)
            if fresh is None:  # read the mode, slot count and layout again, at most once a cycle
                for field in _VIEW:
                    slow.drop(scope, field)
                if not _mig_on(ctx):
                    del errors[before:failed]  # the instances went with MIG: no failure
                    ctx.state.note_instances(scope, ())
                    return None
                fresh = {x.uuid: x for x in _layout(ctx)}
            if s.uuid not in fresh:
                del errors[before:failed]  # the handle saying it is gone is no failure
                log.info("NVML: MIG instance %s of GPU %d (%s) was destroyed; no longer reading it",
                         s.uuid, ctx.index, ctx.scope)  # fmt: skip
                continue
            s = fresh[s.uuid]
        out.append(_instance(ctx, s, memory))
    return out


def _instance(ctx: DeviceContext, s: MigSlot, memory: Any) -> MigReading:
    scope, gi, ci = s.uuid, s.gpu_instance_id, s.compute_instance_id
    processes = tuple(
        replace(
            p,
            gpu_instance_id=p.gpu_instance_id if p.gpu_instance_id is not None else gi,
            compute_instance_id=p.compute_instance_id if p.compute_instance_id is not None else ci,
        )
        for p in list_processes(ctx, s.handle, scope, None if memory is ABSENT else int(memory.used))
    )
    return MigReading(
        gpu_instance_id=gi if gi is not None else s.slot,
        compute_instance_id=ci or 0,
        profile=s.profile,
        uuid=scope,
        memory_total_bytes=None if memory is ABSENT else int(memory.total),
        memory_used_bytes=None if memory is ABSENT else int(memory.used),
        processes=processes,
        placement_start=_placement_start(ctx, scope, gi),
    )


_UNPRIVILEGED: Final = MappingProxyType({pynvml.NVML_ERROR_NO_PERMISSION: ABSENT})


def _placement_start(ctx: DeviceContext, scope: str, gpu_instance_id: int | None) -> int | None:
    """The GPU instance's placement start slot; None when NVML does not tell (see module doc)."""
    if gpu_instance_id is None:
        return None
    slow, nvml, now = ctx.slow, ctx.nvml, ctx.timestamp
    gi = slow.call(nvml, now, scope, "gpu_instance", "nvmlDeviceGetGpuInstanceById", ctx.handle,
                   gpu_instance_id, answers=_UNPRIVILEGED)  # fmt: skip
    if gi is ABSENT:
        return None
    info = slow.call(
        nvml, now, scope, "gpu_instance_info", "nvmlGpuInstanceGetInfo", gi, answers=_UNPRIVILEGED
    )
    return None if info is ABSENT else int(info.placement.start)


def _int(value: Any) -> int | None:
    return None if value is ABSENT or value is None else int(value)


NEEDS = ("processes",)
"""The processes reader's list (each instance takes its processes from it)."""


def read_mig(ctx: DeviceContext) -> Fields:
    if not _mig_on(ctx):
        ctx.slow.drop(ctx.scope, LAYOUT)  # MIG turned on again starts from a fresh layout
        return {"mig_enabled": False}
    try:
        instances = _instances(ctx)
    except DeviceGone:
        ctx.slow.drop(ctx.scope, LAYOUT)  # the GPU may come back reset, with other instances
        raise
    if instances is None:
        return {"mig_enabled": False}
    processes: list[ProcessReading] = list(ctx.fields.get("processes", ()))
    known = {(p.pid, p.gpu_instance_id, p.compute_instance_id) for p in processes}
    for instance in instances:
        for p in instance.processes:
            if (p.pid, p.gpu_instance_id, p.compute_instance_id) not in known:
                processes.append(p)
                known.add((p.pid, p.gpu_instance_id, p.compute_instance_id))
    return {"mig_enabled": True, "mig": tuple(instances), "processes": tuple(processes)}
