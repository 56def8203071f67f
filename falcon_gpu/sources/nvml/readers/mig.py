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

Each GPU instance's placement start (``nvmlDeviceGetGpuInstanceById`` then
``nvmlGpuInstanceGetInfo``, ``placement.start``) tells two instances of one profile
apart: NVIDIA's DRA driver names a MIG device by profile and placement. It changes
only with the MIG layout, so it is re-read with the slow fields. NVML wants a
privileged user for it; NO_PERMISSION leaves it unknown, quietly (the DRA mapping then
falls back to the profile alone, see :mod:`falcon_gpu.attribution.device_index`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pynvml

from falcon_gpu.model.snapshot import MigReading, ProcessReading
from falcon_gpu.sources.nvml.calls import ABSENT, text
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields
from falcon_gpu.sources.nvml.readers.memory import memory_info
from falcon_gpu.sources.nvml.readers.processes import list_processes

MIG_NAME_MARK = " MIG "


def profile_from_name(name: str) -> str:
    return name.rsplit(MIG_NAME_MARK, 1)[1].strip() if MIG_NAME_MARK in name else ""


def _instance(ctx: DeviceContext, slot: int, handle: Any) -> MigReading | None:
    call = ctx.nvml.call
    uuid = call(ctx.scope, "mig_uuid", "nvmlDeviceGetUUID", handle)
    if uuid is ABSENT:
        return None
    scope = text(uuid)
    gi = call(scope, "gpu_instance_id", "nvmlDeviceGetGpuInstanceId", handle)
    ci = call(scope, "compute_instance_id", "nvmlDeviceGetComputeInstanceId", handle)
    name = call(scope, "name", "nvmlDeviceGetName", handle)
    memory = memory_info(ctx, handle, scope)
    gi_value, ci_value = _int(gi), _int(ci)
    placement = _placement_start(ctx, scope, gi_value)
    processes = tuple(
        replace(
            p,
            gpu_instance_id=p.gpu_instance_id if p.gpu_instance_id is not None else gi_value,
            compute_instance_id=p.compute_instance_id if p.compute_instance_id is not None else ci_value,
        )
        for p in list_processes(ctx, handle, scope)
    )
    return MigReading(
        gpu_instance_id=gi_value if gi_value is not None else slot,
        compute_instance_id=ci_value or 0,
        profile=profile_from_name(text(name)) if name is not ABSENT else "",
        uuid=scope,
        memory_total_bytes=None if memory is ABSENT else int(memory.total),
        memory_used_bytes=None if memory is ABSENT else int(memory.used),
        processes=processes,
        placement_start=placement,
    )


_UNPRIVILEGED = {pynvml.NVML_ERROR_NO_PERMISSION: ABSENT}


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


def read_mig(ctx: DeviceContext) -> Fields:
    nvml, now, scope, h = ctx.nvml, ctx.timestamp, ctx.scope, ctx.handle
    mode = ctx.slow.call(nvml, now, scope, "mig_mode", "nvmlDeviceGetMigMode", h)
    if mode is ABSENT or int(mode[0]) != pynvml.NVML_DEVICE_MIG_ENABLE:
        return {"mig_enabled": False}
    count = ctx.slow.call(nvml, now, scope, "mig_count", "nvmlDeviceGetMaxMigDeviceCount", h)
    instances: list[MigReading] = []
    for slot in range(0 if count is ABSENT else int(count)):
        handle = ctx.nvml.call(
            ctx.scope, "mig_handle", "nvmlDeviceGetMigDeviceHandleByIndex", ctx.handle, slot
        )
        if handle is ABSENT:
            continue
        instance = _instance(ctx, slot, handle)
        if instance is not None:
            instances.append(instance)
    processes: list[ProcessReading] = list(ctx.fields.get("processes", ()))
    known = {(p.pid, p.gpu_instance_id, p.compute_instance_id) for p in processes}
    for instance in instances:
        for p in instance.processes:
            if (p.pid, p.gpu_instance_id, p.compute_instance_id) not in known:
                processes.append(p)
                known.add((p.pid, p.gpu_instance_id, p.compute_instance_id))
    return {"mig_enabled": True, "mig": tuple(instances), "processes": tuple(processes)}
