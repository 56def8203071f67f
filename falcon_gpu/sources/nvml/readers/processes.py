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

_VARIANTS: dict[str, tuple[Variant, ...]] = {
    kind: (("v3", f"{base}_v3", {}), ("v2", f"{base}_v2", {}), ("v1", base, {})) for kind, base in LISTS
}
"""Per list: the process-info generations, newest first (``_v3`` -> ``_v2`` -> plain)."""
_PLAN = tuple((kind, f"processes_{kind}", _VARIANTS[kind], (kind,)) for kind, _ in LISTS)
"""Per list: (kind, not-supported key and family, variants, the one-kind types tuple)."""


def list_processes(ctx: DeviceContext, handle: Any, scope: str) -> tuple[ProcessReading, ...]:
    """The merged process lists of ``handle`` (a device or MIG handle).

    Written for the hot path (hundreds of processes per node per cycle): one dict
    entry per process, the types tuple built only when a PID is in several lists."""
    kinds: dict[ProcessKey, tuple[str, ...]] = {}
    memory: dict[ProcessKey, int | None] = {}
    call_first = ctx.nvml.call_first
    for kind, field, variants, alone in _PLAN:
        found = call_first(scope, field, field, variants, handle)
        if found is ABSENT:
            continue
        for info in found:
            gi = getattr(info, "gpuInstanceId", None)
            ci = getattr(info, "computeInstanceId", None)
            key = (
                int(info.pid),
                None if gi is None or gi == NOT_AVAILABLE_UINT else int(gi),
                None if ci is None or ci == NOT_AVAILABLE_UINT else int(ci),
            )
            used = getattr(info, "usedGpuMemory", None)
            used = None if used is None or used == NOT_AVAILABLE_ULL else int(used)
            seen = kinds.get(key)
            if seen is None:
                kinds[key] = alone
                memory[key] = used
                continue
            if kind not in seen:
                kinds[key] = (*seen, kind)
            if used is not None and used > (memory[key] or 0):
                memory[key] = used
    names, shares = ctx.names.get, ctx.sm_by_pid
    if shares is None:  # NVML gives no per-process utilisation here: every share is absent
        return tuple(
            ProcessReading(k[0], names(k[0]), t, memory[k], None, k[1], k[2]) for k, t in kinds.items()
        )
    return tuple(
        ProcessReading(k[0], names(k[0]), t, memory[k], shares.get(k[0], 0.0), k[1], k[2])
        for k, t in kinds.items()
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
