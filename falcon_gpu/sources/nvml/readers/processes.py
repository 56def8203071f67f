"""Processes on a device: compute, graphics and MPS lists merged, with names and SM share.

Each list is read through the newest process-info generation the binding and
driver offer (``_v3`` -> ``_v2`` -> plain), probed once. The lists and the samples are asked through
``ctx.calls``: on the real bindings one C call each into a buffer the device keeps
(:class:`~falcon_gpu.sources.nvml.direct.DirectCalls`, where pynvml makes a size probe, the call and
a Python object per process), on the simulator pynvml's calls; both answer objects with pynvml's
attribute names. A PID found in several
lists becomes one :class:`ProcessReading` whose ``types`` names them (merged per
PID and MIG instance, since one process can use several instances).

SM share comes from ``nvmlDeviceGetProcessUtilization(handle, lastSeen)``: the
samples newer than ``lastSeen`` are averaged per PID. ``lastSeen`` is the later of
the previous cycle's timestamp and the newest sample already used, so no sample
counts twice. NOT_FOUND means "no new samples": no process ran a kernel, every share
is 0 (so does pynvml's NVMLError(NVML_SUCCESS), raised when the driver reports zero
samples); a process without a sample also has share 0. Only where NVML gives no
per-process utilisation at all (NOT_SUPPORTED: MIG-enabled GPUs, some devices) is
every share None, so that pod utilisation is absent there, not 0. The samples are read
once per cycle (:func:`process_samples`), by the utilization reader when it runs first:
their ``encUtil`` / ``decUtil`` tell it whether the encoder and decoder were in use.

The MPS list is asked only while the compute list holds an MPS server or a process whose
name cannot be read. NVIDIA's MPS documentation (docs.nvidia.com/deploy/mps, section
"nvidia-cuda-mps-server"): "The nvidia-cuda-mps-server process owns the CUDA context on the
GPU and uses it to execute GPU operations for its client application processes. Due to this,
when querying active processes via nvidia-smi (or any NVML-based application)
nvidia-cuda-mps-server will appear as the active CUDA process"; MPS clients
(``nvmlDeviceGetMPSComputeRunningProcesses``: "processes with a MPS compute context") exist
only while a server runs on the device. A process named ``nvidia-cuda-mps-server`` in the
compute list therefore opens the gate; an unnamed one (a container without the host's PID
namespace cannot read names) might be the server, so it opens it too; so does a last answer
that listed clients (to see them go); and it is asked once a minute whatever the compute
list holds (:meth:`~falcon_gpu.sources.nvml.slow.SlowReadings.gated`). Its answer is kept per
scope while the compute list holds the same PIDs as in the cycle before.

The graphics list (``nvmlDeviceGetGraphicsRunningProcesses``: "processes with a graphics context") is
empty on a compute node, and a process that opens a graphics context shows elsewhere first: the
process-utilisation samples name every PID that ran work on the GPU, and a new context allocates
device memory. So it is asked (:func:`_graphics_may_run`, through
:meth:`~falcon_gpu.sources.nvml.slow.SlowReadings.gated`) while its last answer listed processes (to
see them go); when a sample of this cycle names a PID in neither the compute nor the MPS list; when
the device's used memory beyond what the compute and MPS processes use rose above its level at the
last such ask; every cycle where there are no process samples (NOT_SUPPORTED under MIG, or failed)
or no memory reading; and at least once a minute. Otherwise its last answer, empty, stands. What only
the minute finds: a compute process that also opens a graphics context without its memory growing
beyond its own, and a graphics context smaller than a fall of that unlisted memory since the last ask.

Written for the hot path (hundreds of processes per node, every cycle, most of them unchanged): a
process whose name, types, memory and share did not move keeps last cycle's :class:`ProcessReading`
(kept per scope for one cycle, in ``ctx.state.kept_processes``). The samples' usual answer (one per
PID, all newer than ``lastSeen``, percents already converted, the engines idle) is read by a short loop
that does five attribute loads and one dict store per sample and nothing else; any other answer leaves
it for the general loop, which counts and averages (:func:`_samples`). A device whose three lists (each
process's PID, memory and instance IDs) and SM shares read as in its last full pass gets that pass's
whole tuple again (a steady training job: one comparison per list instead of a merge and a check per
process; a graphics or MPS answer the gate kept is the same object as before, so it is compared by
identity), its names kept alive for the cycle as the general path would
(:meth:`~falcon_gpu.sources.nvml.process_names.ProcessNames.held`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter, not_
from types import MappingProxyType
from typing import Any, Final

import pynvml

from falcon_gpu.model.snapshot import ProcessReading
from falcon_gpu.sources.nvml.calls import ABSENT, Variant
from falcon_gpu.sources.nvml.readers.base import PERCENT_TO_RATIO, DeviceContext, Fields, ProcessSamples

LISTS = (
    ("compute", "nvmlDeviceGetComputeRunningProcesses"),
    ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
    ("mps", "nvmlDeviceGetMPSComputeRunningProcesses"),
)
NOT_AVAILABLE_UINT = 0xFFFFFFFF
NOT_AVAILABLE_ULL = 0xFFFFFFFFFFFFFFFF

ProcessKey = tuple[int, int | None, int | None]

_VARIANTS: Final[Mapping[str, tuple[Variant, ...]]] = MappingProxyType(
    {kind: (("v3", f"{base}_v3", {}), ("v2", f"{base}_v2", {}), ("v1", base, {})) for kind, base in LISTS}
)
"""Per list: the process-info generations, newest first (``_v3`` -> ``_v2`` -> plain)."""
(_COMPUTE_FIELD, _GRAPHICS_FIELD, _MPS_FIELD) = (f"processes_{kind}" for kind, _ in LISTS)
"""Per list: its not-supported key and variant family."""
_COMPUTE_VARIANTS, _GRAPHICS_VARIANTS, _MPS_VARIANTS = (_VARIANTS[kind] for kind, _ in LISTS)
_COMPUTE_ALONE, _GRAPHICS_ALONE, _MPS_ALONE = (("compute",), ("graphics",), ("mps",))
"""The types tuple of a process in one list only."""
MAX_KEPT = 4096
"""Readings kept per scope at most (a pathological process count keeps none)."""
MPS_SERVER = "nvidia-cuda-mps-server"
"""The MPS server's process name (the path's last part where NVML answers the whole path)."""
_MPS_SERVER_PATH = "/" + MPS_SERVER


def _compute_pids(ctx: DeviceContext, scope: str, compute: Any) -> tuple[bool, frozenset[int]]:
    """Whether ``compute`` (a compute list, or ABSENT) may hold the MPS server, and its PIDs.

    The same PIDs as in the last cycle give the last answer: a PID's name does not change while it
    lives (:class:`~falcon_gpu.sources.nvml.process_names.ProcessNames` keeps it as long), and a PID
    that went and came back is one cycle absent, which changes the PIDs."""
    if compute is ABSENT:
        return True, frozenset()
    pids: list[int] = [info.pid for info in compute]
    gates = ctx.state.mps_gates
    last = gates.get(scope)
    if last is not None and last[0] == pids:
        return last[1], last[2]
    names = ctx.names.get
    may = False
    for pid in pids:
        name = names(int(pid))
        if name is None or name == MPS_SERVER or name.endswith(_MPS_SERVER_PATH):
            may = True
            break
    known = frozenset(pids)
    gates[scope] = (pids, may, known)
    return may, known


_WITH_IDS = attrgetter("pid", "usedGpuMemory", "gpuInstanceId", "computeInstanceId")
_WITHOUT_IDS = attrgetter("pid", "usedGpuMemory")


def _signature(found: Any) -> Any:
    """What a list's readings are built from (each process's PID, memory and instance IDs), comparable
    with ``==`` to last cycle's: ABSENT, or one tuple per process (one C-level ``attrgetter`` each)."""
    if found is ABSENT or not found:
        return found if found is ABSENT else ()
    return tuple(map(_WITH_IDS if hasattr(found[0], "gpuInstanceId") else _WITHOUT_IDS, found))


class _Steady:
    """One scope's last full pass: the lists' signatures and samples it was built from, what the gates
    derived from the compute list, and the readings (handed out again while nothing of it moved).

    The graphics and MPS answers themselves are kept too: a gate that did not ask hands out its kept
    answer, the same list object as before, whose signature is the one kept (no list is changed after
    NVML answered it), so the usual cycle compares identities instead of building those signatures."""

    __slots__ = (
        "compute", "graphics", "graphics_found", "listed", "may_run", "mps", "mps_found", "named", "pids",
        "readings", "shares",
    )  # fmt: skip

    def __init__(
        self, compute: Any, listed: int, may_run: bool, pids: frozenset[int], graphics: tuple[Any, Any],
        mps: tuple[Any, Any], shares: dict[int, float] | None, readings: tuple[ProcessReading, ...],
    ) -> None:  # fmt: skip
        self.compute = compute
        self.listed = listed
        self.may_run = may_run
        self.pids = pids
        self.graphics_found, self.graphics = graphics
        """The graphics list as NVML answered it (or ABSENT), and its :func:`_signature`."""
        self.mps_found, self.mps = mps
        """The same for the MPS list."""
        self.shares = shares
        self.readings = readings
        self.named = frozenset(p.pid for p in readings)
        """The PIDs whose names the readings hold."""


_no_clients: Final[Callable[[Any], bool]] = not_
"""A list answer that holds no process: ABSENT (which is false) or an empty list. The gates ask it of
their kept answer every cycle: ``operator.not_`` answers it without a Python frame."""


def _graphics_may_run(
    ctx: DeviceContext,
    scope: str,
    compute_pids: frozenset[int],
    listed: int,
    mps: Any,
    used: int | None,
) -> bool:
    """Whether a graphics context may have appeared that the compute and MPS lists do not show.

    True where this cycle's process samples name a PID in neither list (a graphics process running
    work), where the memory the device uses beyond those lists' processes (``used`` - ``listed``)
    rose above what it was when the graphics list was last asked for a reason of its own (a new
    context allocates), and wherever that cannot be told: no process samples (NOT_SUPPORTED under MIG,
    or failed), no device memory reading, no compute list."""
    shares = ctx.sm_by_pid
    if shares is None or used is None or listed < 0:
        return True
    may = False
    if mps:  # neither ABSENT (which is false) nor empty
        listed += sum(_used(info) or 0 for info in mps)
    if shares and not shares.keys() <= compute_pids:
        may = mps is ABSENT or not shares.keys() <= compute_pids.union(info.pid for info in mps)
    beyond = used - listed
    levels = ctx.state.graphics_levels
    level = levels.get(scope)
    if may or level is None or beyond > level:
        levels[scope] = beyond
        return True
    return False


def _used(info: Any) -> int | None:
    used = getattr(info, "usedGpuMemory", None)
    return None if used is None or used == NOT_AVAILABLE_ULL else int(used)


def _merge(entries: dict[ProcessKey, list[Any]], kind: str, alone: tuple[str, ...], found: Any) -> int:
    """Add one list's processes to ``entries``; the memory they use that NVML tells (-1: no list)."""
    if found is ABSENT:
        return -1
    if not found:
        return 0
    total = 0
    ids = hasattr(found[0], "gpuInstanceId")  # v1 structs have no instance IDs
    get = entries.get
    for info in found:  # every process-info struct generation has pid and usedGpuMemory (ints)
        if ids:
            gi, ci = info.gpuInstanceId, info.computeInstanceId
            key = (
                info.pid,
                None if gi is None or gi == NOT_AVAILABLE_UINT else gi,
                None if ci is None or ci == NOT_AVAILABLE_UINT else ci,
            )
        else:
            key = (info.pid, None, None)
        used = info.usedGpuMemory
        if used is None or used == NOT_AVAILABLE_ULL:
            used = None
        else:
            total += used
        entry = get(key)
        if entry is None:
            entries[key] = [alone, used]
            continue
        if kind not in entry[0]:
            entry[0] = (*entry[0], kind)
        if used is not None and used > (entry[1] or 0):
            entry[1] = used
    return total


def list_processes(
    ctx: DeviceContext, handle: Any, scope: str, used_memory: int | None = None
) -> tuple[ProcessReading, ...]:
    """The merged process lists of ``handle`` (a device or MIG handle, whose used memory is
    ``used_memory``: None where unknown, which asks the graphics list every cycle).

    Written for the hot path (hundreds of processes per node per cycle): one dict
    entry per process (its types and memory), the types tuple built only when a PID
    is in several lists, the instance IDs looked for once per list (a list's entries
    are all of one struct version). The lists are asked compute, MPS, graphics (each gate
    needs the lists before it) and merged compute, graphics, MPS (the order of the readings and
    of a process's types)."""
    nvml, slow, now = ctx.nvml, ctx.slow, ctx.timestamp
    ask = ctx.calls.process_list
    compute = ask(scope, _COMPUTE_FIELD, _COMPUTE_VARIANTS, handle)
    steady = ctx.state.process_lists
    last = steady.get(scope)
    computed = _signature(compute)
    if last is not None and last.compute != computed:
        last = None  # from here on: the last full pass, where it read the compute list as this cycle
    entries: dict[ProcessKey, list[Any]] | None = None
    if last is not None:
        listed, mps_may_run, compute_pids = last.listed, last.may_run, last.pids
    else:
        entries = {}
        listed = _merge(entries, "compute", _COMPUTE_ALONE, compute)
        mps_may_run, compute_pids = _compute_pids(ctx, scope, compute)
    mps = slow.gated(
        nvml, now, scope, _MPS_FIELD, ask, scope, _MPS_FIELD, _MPS_VARIANTS, handle,
        in_use=mps_may_run, idle=_no_clients,
    )  # fmt: skip
    graphics = slow.gated(
        nvml, now, scope, _GRAPHICS_FIELD, ask, scope, _GRAPHICS_FIELD, _GRAPHICS_VARIANTS, handle,
        in_use=_graphics_may_run(ctx, scope, compute_pids, listed, mps, used_memory), idle=_no_clients,
    )  # fmt: skip
    shares = ctx.sm_by_pid
    if last is not None:
        graphed, mpsed = last.graphics, last.mps
        if graphics is not last.graphics_found:  # asked again: kept from now on if it reads the same
            graphed = _signature(graphics)
            if graphed == last.graphics:
                last.graphics_found = graphics
        if mps is not last.mps_found:
            mpsed = _signature(mps)
            if mpsed == last.mps:
                last.mps_found = mps
        if (
            last.graphics == graphed
            and last.mps == mpsed
            and last.shares == shares
            and ctx.names.held(last.named)
        ):
            return last.readings
    else:
        graphed, mpsed = _signature(graphics), _signature(mps)
    if entries is None:
        entries = {}
        _merge(entries, "compute", _COMPUTE_ALONE, compute)
    _merge(entries, "graphics", _GRAPHICS_ALONE, graphics)
    _merge(entries, "mps", _MPS_ALONE, mps)
    readings = _readings(ctx, scope, entries)
    steady[scope] = _Steady(
        computed, listed, mps_may_run, compute_pids, (graphics, graphed), (mps, mpsed), shares, readings
    )
    return readings


def _readings(
    ctx: DeviceContext, scope: str, entries: dict[ProcessKey, list[Any]]
) -> tuple[ProcessReading, ...]:
    """One :class:`ProcessReading` per entry: last cycle's value of the same process where nothing in it
    changed (name, types, memory, share), else a new one. Most processes of a node read the same from one
    cycle to the next, and an unchanged value is also the same object for everything downstream. Kept
    per scope for one cycle only (the processes seen in it), at most :data:`MAX_KEPT` of them."""
    kept_by_scope = ctx.state.kept_processes
    kept = kept_by_scope.get(scope) or {}
    names, shares = ctx.names.get, ctx.sm_by_pid
    share = None if shares is None else shares.get
    now: dict[ProcessKey, ProcessReading] = {}
    for key, (types, used) in entries.items():
        pid = key[0]
        name = names(pid)
        sm = None if share is None else share(pid, 0.0)
        reading = kept.get(key)
        if (
            reading is None
            or reading.sm_util_ratio != sm
            or reading.used_memory_bytes != used
            or reading.types != types
            or reading.name != name
        ):
            reading = ProcessReading(pid, name, types, used, sm, key[1], key[2])
        now[key] = reading
    kept_by_scope[scope] = now if len(now) <= MAX_KEPT else {}
    return tuple(now.values())


_NO_SAMPLES: Final = MappingProxyType({pynvml.NVML_SUCCESS: (), pynvml.NVML_ERROR_NOT_FOUND: ()})
"""The codes that mean "no new samples" (built once: this call is made every cycle on every GPU)."""


_SHARES: Final = MappingProxyType({percent: PERCENT_TO_RATIO(float(percent)) for percent in range(101)})
"""Each SM percent's share (0-1), converted once, at import: NVML answers whole percents."""


def process_samples(ctx: DeviceContext) -> ProcessSamples:
    """This cycle's samples of the device (asked once per cycle, kept in ``ctx``)."""
    if ctx.samples is None:
        ctx.samples = _samples(ctx)
    return ctx.samples


def _samples(ctx: DeviceContext) -> ProcessSamples:
    """Mean SM share per PID since the last cycle, and whether the encoder / decoder were used.

    The usual answer is read the short way. NVML's documentation of ``nvmlDeviceGetProcessUtilization``:
    "One utilization sample structure is returned per process running", with samples newer than
    ``lastSeen`` only. So the usual answer has one sample per PID (its share is the share, nothing to
    count or divide), every sample newer than ``last_seen``, each SM percent one already converted
    (:data:`_SHARES`) and the engines idle in every sample (one test per sample for both; which engine
    was busy is looked up only where one was). Anything else (a PID sampled twice, a sample already
    used, a percent not seen before) leaves the short way before it changed anything, and
    :func:`_averaged` reads the samples again under the general rules."""
    scope = ctx.scope
    last_seen = ctx.last_seen_us.get(scope, 0)
    # pynvml raises NVMLError(NVML_SUCCESS) when the driver has no samples at all: also "none".
    samples = ctx.calls.process_samples(scope, ctx.handle, last_seen, _NO_SAMPLES)
    if samples is ABSENT:
        return ProcessSamples(None, True, True)
    now_us = int(ctx.timestamp * 1_000_000)
    newest = now_us if now_us > last_seen else last_seen
    shares: dict[int, float] = {}
    by_percent = _SHARES
    engines = False
    try:
        for sample in samples:
            stamp = sample.timeStamp
            if stamp <= last_seen:
                return _averaged(ctx, samples, last_seen, newest)
            if stamp > newest:  # a sample taken after this cycle's time: lastSeen moves to it
                newest = stamp
            shares[sample.pid] = by_percent[sample.smUtil]
            if sample.encUtil or sample.decUtil:
                engines = True
    except KeyError:  # a percent not in _SHARES yet
        return _averaged(ctx, samples, last_seen, newest)
    if len(shares) != len(samples):  # a PID with several samples: their mean
        return _averaged(ctx, samples, last_seen, newest)
    ctx.last_seen_us[scope] = int(newest)
    if engines:
        encoder = any(sample.encUtil for sample in samples)
        return ProcessSamples(shares, encoder, any(sample.decUtil for sample in samples))
    return ProcessSamples(shares, False, False)


def _averaged(ctx: DeviceContext, samples: Any, last_seen: int, newest: int) -> ProcessSamples:
    """The general rules: the samples newer than ``last_seen`` count, a PID's shares are averaged,
    ``lastSeen`` moves to the newest sample where that is later than ``newest``."""
    shares: dict[int, float] = {}  # per PID: its one sample's share, or the sum of its shares
    counts: dict[int, int] = {}  # only the PIDs with more than one sample (rare: one per PID and cycle)
    encoder = decoder = False
    by_percent = _SHARES
    for sample in samples:
        stamp = sample.timeStamp
        if stamp <= last_seen:
            continue
        if stamp > newest:
            newest = stamp
        pid = sample.pid
        percent = sample.smUtil
        share = by_percent.get(percent)
        if share is None:
            share = PERCENT_TO_RATIO(float(percent))
        if pid in shares:
            shares[pid] += share
            counts[pid] = counts.get(pid, 1) + 1
        else:
            shares[pid] = share
        if not encoder and sample.encUtil:
            encoder = True
        if not decoder and sample.decUtil:
            decoder = True
    ctx.last_seen_us[ctx.scope] = int(newest)
    for pid, n in counts.items():
        shares[pid] /= n
    return ProcessSamples(shares, encoder, decoder)


NEEDS = ("memory_used_bytes",)
"""The memory reader's used bytes (what the graphics-list gate compares)."""


def read_processes(ctx: DeviceContext) -> Fields:
    samples = ctx.samples  # process_samples, written out: this runs for every GPU every cycle
    if samples is None:
        samples = ctx.samples = _samples(ctx)
    ctx.sm_by_pid = samples.sm_by_pid
    return {"processes": list_processes(ctx, ctx.handle, ctx.scope, ctx.fields.get("memory_used_bytes"))}
