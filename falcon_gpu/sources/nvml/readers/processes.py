"""Processes on a device: compute, graphics and MPS lists merged, with names and SM share.

Each list is read through the newest process-info generation the binding and
driver offer (``_v3`` -> ``_v2`` -> plain), probed once. A PID found in several
lists becomes one :class:`ProcessReading` whose ``types`` names them (merged per
PID and MIG instance, since one process can use several instances).

SM share comes from ``nvmlDeviceGetProcessUtilization(handle, lastSeen)``: the
samples newer than ``lastSeen`` are averaged per PID. ``lastSeen`` is the later of
the previous cycle's timestamp and the newest sample already used, so no sample
counts twice. NOT_FOUND means "no new samples": no process ran a kernel, every share
is 0 (so does pynvml's NVMLError(NVML_SUCCESS), raised when the driver reports zero
samples); a process without a sample also has share 0. Only where NVML gives no
per-process utilisation at all (NOT_SUPPORTED: MIG-enabled GPUs, some devices) is
every share None, so that pod utilisation is absent there, not 0.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pynvml

from falcon_gpu.model.snapshot import ProcessReading
from falcon_gpu.sources.nvml.calls import ABSENT, Variant
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields, ratio

LISTS = (
    ("compute", "nvmlDeviceGetComputeRunningProcesses"),
    ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
    ("mps", "nvmlDeviceGetMPSComputeRunningProcesses"),
)
NOT_AVAILABLE_UINT = 0xFFFFFFFF
NOT_AVAILABLE_ULL = 0xFFFFFFFFFFFFFFFF

ProcessKey = tuple[int, int | None, int | None]


def _instance_id(value: Any) -> int | None:
    return None if value is None or int(value) == NOT_AVAILABLE_UINT else int(value)


def list_processes(ctx: DeviceContext, handle: Any, scope: str) -> tuple[ProcessReading, ...]:
    """The merged process lists of ``handle`` (a device or MIG handle)."""
    types: dict[ProcessKey, list[str]] = {}
    memory: dict[ProcessKey, int | None] = {}
    for kind, base in LISTS:
        variants: list[Variant] = [(v, f"{base}_{v}", (handle,), {}) for v in ("v3", "v2")] + [
            ("v1", base, (handle,), {})
        ]
        found = ctx.nvml.call_first(scope, f"processes_{kind}", f"processes_{kind}", variants)
        if found is ABSENT:
            continue
        for info in found:
            key = (
                int(info.pid),
                _instance_id(getattr(info, "gpuInstanceId", None)),
                _instance_id(getattr(info, "computeInstanceId", None)),
            )
            types.setdefault(key, []).append(kind)
            used = getattr(info, "usedGpuMemory", None)
            used = None if used is None or int(used) == NOT_AVAILABLE_ULL else int(used)
            if key not in memory or (used is not None and used > (memory[key] or 0)):
                memory[key] = used
    return tuple(
        ProcessReading(
            pid=pid,
            name=ctx.names.get(pid),
            types=tuple(dict.fromkeys(kinds)),
            used_memory_bytes=memory.get((pid, gi, ci)),
            sm_util_ratio=None if ctx.sm_by_pid is None else ctx.sm_by_pid.get(pid, 0.0),
            gpu_instance_id=gi,
            compute_instance_id=ci,
        )
        for (pid, gi, ci), kinds in types.items()
    )


def _sm_shares(ctx: DeviceContext) -> dict[int, float] | None:
    """Mean SM share per PID since the last cycle; None when NVML gives none on this device."""
    last_seen = ctx.last_seen_us.get(ctx.scope, 0)
    # pynvml raises NVMLError(NVML_SUCCESS) when the driver has no samples at all: also "none".
    samples = ctx.nvml.call(
        ctx.scope, "process_utilization", "nvmlDeviceGetProcessUtilization", ctx.handle, last_seen,
        answers={pynvml.NVML_SUCCESS: [], pynvml.NVML_ERROR_NOT_FOUND: []},
    )  # fmt: skip
    if samples is ABSENT:
        return None
    newest = max(last_seen, int(ctx.timestamp * 1_000_000))
    by_pid: dict[int, list[float]] = defaultdict(list)
    for sample in samples:
        stamp = int(sample.timeStamp)
        if stamp <= last_seen:
            continue
        newest = max(newest, stamp)
        by_pid[int(sample.pid)].append(ratio(sample.smUtil))
    ctx.last_seen_us[ctx.scope] = newest
    return {pid: sum(v) / len(v) for pid, v in by_pid.items()}


def read_processes(ctx: DeviceContext) -> Fields:
    ctx.sm_by_pid = _sm_shares(ctx)
    return {"processes": list_processes(ctx, ctx.handle, ctx.scope)}
