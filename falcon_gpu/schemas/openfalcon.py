"""The Open-Falcon schema (CONTRACT section 4): gpu-mon's metric names, so its users'
strategies keep working, plus node roll-ups and per-pod items.

Tags with an empty value are left out; tag values keep only ``[A-Za-z0-9._-]``;
``metric`` + ``tags`` stay under 255 characters (falcon-agent and transfer reject
longer counters) by shortening the longest tag value and marking it with a short
hash so distinct values stay distinct.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.samples import FalconItem
from falcon_gpu.model.snapshot import DeviceReading
from falcon_gpu.schemas import openfalcon_jobs

MIB = 1 << 20
MAX_COUNTER = 254
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def sanitize(value: str) -> str:
    return _UNSAFE.sub("_", value)


def _digest(value: str) -> str:
    import hashlib  # only for an over-long tag: hashlib loads OpenSSL, a few ms of every plugin start

    return hashlib.blake2s(value.encode(), digest_size=4).hexdigest()


def format_tags(metric: str, pairs: list[tuple[str, str]]) -> str:
    """``k=v,k=v`` with sanitised values, shortened until metric + tags fit. A tag with
    an empty value is left out (``container=`` would be a distinct, meaningless counter)."""
    clean = [(k, sanitize(v)) for k, v in pairs if v]
    tags = ",".join(f"{k}={v}" for k, v in clean)
    while len(metric) + len(tags) > MAX_COUNTER:
        i = max(range(len(clean)), key=lambda j: len(clean[j][1]))
        k, v = clean[i]
        excess = len(metric) + len(tags) - MAX_COUNTER
        keep = max(len(v) - excess - 9, 1)
        if keep >= len(v) - 9:
            break  # nothing left to shorten; keys alone are too long (not reachable with our keys)
        clean[i] = (k, f"{v[:keep]}-{_digest(v)}")
        tags = ",".join(f"{k}={v}" for k, v in clean)
    return tags


class _Items:
    def __init__(self, cycle: CycleData) -> None:
        self.endpoint = sanitize(cycle.node)
        self.ts = int(cycle.snapshot.timestamp)
        self.step = cycle.step
        self.extra = list(cycle.extra_labels)
        """The ``labels`` setting: extra tags on every item."""
        self.items: list[FalconItem] = []

    def add(self, metric: str, value: float | int | bool | None, tags: list[tuple[str, str]]) -> None:
        if value is None or not math.isfinite(value):
            return  # JSON has no NaN/Inf: falcon-agent would drop the whole plugin output
        self.items.append(
            FalconItem(
                self.endpoint,
                metric,
                self.ts,
                self.step,
                round(float(value), 4),
                "GAUGE",
                format_tags(metric, tags + self.extra if self.extra else tags),
            )
        )


def _pct(r: float | None) -> float | None:
    return None if r is None else r * 100


def _mib(n: int | None) -> float | None:
    return None if n is None else n / MIB


def _mib_s(rate: float | None) -> float | None:
    """Bytes per second -> MB per second: gpu-mon's unit for ``Rx``/``Tx`` (DCGM's PCIe throughput in MB)."""
    return None if rate is None else rate / MIB


def _device(out: _Items, d: DeviceReading, tags: list[tuple[str, str]]) -> None:
    out.add("GPUUtils", _pct(d.utilization_ratio), tags)
    out.add("MemUtils", _pct(d.memory_utilization_ratio), tags)
    out.add("FBUsed", _mib(d.memory_used_bytes), tags)
    out.add("FBfree", _mib(d.memory_free_bytes), tags)
    out.add("FBtotal", _mib(d.memory_total_bytes), tags)
    out.add("Performance", d.performance_state, tags)
    out.add("DeviceTemperature", d.temperature_celsius, tags)
    out.add("MemTemperature", d.memory_temperature_celsius, tags)
    out.add("PowerUsed", d.power_watts, tags)
    out.add("PowerCurrentLimit", d.power_limit_watts, tags)
    out.add("SmClock", None if d.sm_clock_hertz is None else d.sm_clock_hertz / 1e6, tags)
    out.add("MemClock", None if d.memory_clock_hertz is None else d.memory_clock_hertz / 1e6, tags)
    out.add("FanSpeed", _pct(d.fan_speed_ratio), tags)
    out.add("Encoder", _pct(d.encoder_utilization_ratio), tags)
    out.add("Decoder", _pct(d.decoder_utilization_ratio), tags)
    out.add("Replays", d.pcie_replays, tags)
    if d.ecc is not None:
        out.add("SingleBitError", d.ecc.corrected_aggregate, tags)
        out.add("DoubleBitError", d.ecc.uncorrected_aggregate, tags)
    if d.retired_pages is not None:
        out.add("RPSingleError", d.retired_pages.single_bit, tags)
        out.add("RPDoubleError", d.retired_pages.double_bit, tags)
    if d.gpm is not None:
        out.add("SmActive", _pct(d.gpm.sm_active), tags)
        out.add("SmOccupancy", _pct(d.gpm.sm_occupancy), tags)
        out.add("TensorActive", _pct(d.gpm.tensor_active), tags)
        out.add("DramActive", _pct(d.gpm.dram_active), tags)
    out.add("Rx", _mib_s(d.pcie_rx_bytes_per_second), tags)
    out.add("Tx", _mib_s(d.pcie_tx_bytes_per_second), tags)
    out.add("NvlinkRx", _mib_s(d.nvlink_rx_bytes_per_second), tags)
    out.add("NvlinkTx", _mib_s(d.nvlink_tx_bytes_per_second), tags)


def _rollup(out: _Items, metric: str, values: list[float]) -> None:
    if values:
        out.add(metric, sum(values), [("type", "sum")])
        out.add(metric, sum(values) / len(values), [("type", "ave")])


def render(cycle: CycleData) -> tuple[FalconItem, ...]:
    out = _Items(cycle)
    devices = cycle.snapshot.devices
    for d in devices:
        tags = [("GpuId", str(d.index)), ("uuid", d.uuid)]
        health = cycle.health.get(d.uuid)
        out.add("GPUAlive", d.up, tags)
        if health is not None:
            out.add("GPUHealth", health.overall, tags)
            out.add("XidErrors", sum(health.xid_in_interval.values()), tags)
        if d.up:
            _device(out, d, tags)
    up = [d for d in devices if d.up]
    _rollup(out, "GPUUtils", [v * 100 for d in up if (v := d.utilization_ratio) is not None])
    _rollup(out, "MemUtils", [v * 100 for d in up if (v := d.memory_utilization_ratio) is not None])
    _rollup(out, "FBUsed", [v / MIB for d in up if (v := d.memory_used_bytes) is not None])
    if cycle.snapshot.nvml_ok:
        out.add("GPUCount", len(devices), [])
        for model, n in sorted(Counter(d.name for d in devices).items()):  # "which models, how many"
            out.add("GPUCount", n, [("model", model)])
    for resource, count in cycle.attribution.allocatable or ():
        out.add("AllocatableGPUs", count, [("resource", resource)])
    index = {d.uuid: d.index for d in devices}
    gi = {m.uuid: m.gpu_instance_id for d in devices for m in d.mig}
    for use in cycle.attribution.pods:
        if use.gpu_uuid not in index:
            continue
        tags = [("GpuId", str(index[use.gpu_uuid]))]
        if use.mig_uuid is not None and use.mig_uuid in gi:
            tags.append(("gi", str(gi[use.mig_uuid])))
        c = use.container
        tags += [("namespace", c.namespace), ("pod", c.pod), ("container", c.container)]
        util = use.utilization_ratio
        out.add("PodGPUUtils", None if util is None else min(util, 1.0) * 100, tags)
        out.add("PodFBUsed", use.memory_used_bytes / MIB, tags)
        out.add("PodProcesses", use.processes, tags)
    for box in cycle.attribution.containers:  # plain containers: CONTRACT section 5, issue 13
        if box.gpu_uuid not in index:
            continue
        tags = [("GpuId", str(index[box.gpu_uuid])), ("container", box.name)]
        util = box.utilization_ratio
        out.add("ContainerGPUUtils", None if util is None else min(util, 1.0) * 100, tags)
        out.add("ContainerFBUsed", box.memory_used_bytes / MIB, tags)
    jobs: dict[tuple[int, str], tuple[float | None, int]] = {}  # one item per GPU and job: steps summed
    for job in cycle.attribution.slurm_jobs:
        if job.gpu_uuid not in index:
            continue
        key = (index[job.gpu_uuid], job.job)
        util, memory = jobs.get(key, (0.0, 0))
        u = None if util is None or job.utilization_ratio is None else util + job.utilization_ratio
        jobs[key] = (u, memory + job.memory_used_bytes)
    for (gpu_id, job_id), (util, memory) in sorted(jobs.items()):
        tags = [("GpuId", str(gpu_id)), ("slurm_job", job_id)]
        out.add("SlurmJobGPUUtils", None if util is None else min(util, 1.0) * 100, tags)
        out.add("SlurmJobFBUsed", memory / MIB, tags)
    for metric, value, tags in openfalcon_jobs.items(cycle.jobs_finished):
        out.add(metric, value, tags)
    return tuple(out.items)
