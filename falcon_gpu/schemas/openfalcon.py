"""The Open-Falcon schema (CONTRACT section 4): gpu-mon's metric names, so its users'
strategies keep working, plus node roll-ups and per-pod items.

Tags with an empty value are left out; tag values keep only ``[A-Za-z0-9._-]`` (every
other character becomes ``_``). Where that changed a workload's name (``namespace``,
``pod``, ``container``, ``slurm_job``), the value gets ``-`` and a short hash of the
original (8 hex digits of BLAKE2s over its UTF-8), so pods ``a b`` and ``a,b`` stay two
tag sets (``a_b-<hash>`` each) instead of meeting in ``a_b``; a name that needed no
change is sent as it is. Other tags (``model``, ``resource``, the ``labels`` setting's)
keep the plain sanitised form strategies already match: their values come from NVML,
the kubelet or the node's own settings and do not tell two series of one node apart.
``metric`` + ``tags`` stay under 255 characters (falcon-agent and transfer reject
longer counters) by shortening the longest tag value and marking it with a short
hash so distinct values stay distinct.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from operator import attrgetter

from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.samples import FalconItem
from falcon_gpu.model.snapshot import DeviceReading
from falcon_gpu.readings.device import BOARD, BY_FIELD, INTERCONNECT
from falcon_gpu.readings.units import BYTES, MIB, PERCENT, RATIO, converter
from falcon_gpu.schemas import fabric, openfalcon_jobs
from falcon_gpu.schemas.scalars import ScalarSeries
from falcon_gpu.schemas.selection import EVERYTHING, MetricSelection

BOARD_SERIES = ScalarSeries(BOARD, "openfalcon")
"""gpu-mon's per-GPU items of the scalar readings, in its units (from the reading table)."""
INTERCONNECT_SERIES = ScalarSeries(INTERCONNECT, "openfalcon")
ROLLUPS = ("utilization_ratio", "memory_utilization_ratio", "memory_used_bytes")
"""Readings also summed and averaged over the node's GPUs (``type=sum`` / ``type=ave``)."""
_ROLLUPS = tuple((BOARD_SERIES.names[f], attrgetter(f), BY_FIELD[f].to_schema("openfalcon")) for f in ROLLUPS)
_PERCENT = converter(RATIO, PERCENT)
_TO_MIB = converter(BYTES, MIB)
_GPM = (("SmActive", "sm_active"), ("SmOccupancy", "sm_occupancy"), ("TensorActive", "tensor_active"),
        ("DramActive", "dram_active"))  # fmt: skip
"""(gpu-mon's metric, GpmReading field): percentages."""
NAMES: tuple[str, ...] = tuple(
    dict.fromkeys(
        (
            "GPUAlive", "GPUHealth", "XidErrors", *BOARD_SERIES.names.values(), "SingleBitError",
            "DoubleBitError", "RPSingleError", "RPDoubleError", *(metric for metric, _ in _GPM),
            *INTERCONNECT_SERIES.names.values(), "FabricState", "FabricFaults", "GPUCount",
            "AllocatableGPUs", "PodGPUUtils", "PodFBUsed", "PodProcesses", "ContainerGPUUtils",
            "ContainerFBUsed", "SlurmJobGPUUtils", "SlurmJobFBUsed", *openfalcon_jobs.METRICS,
        )
    )
)  # fmt: skip
"""Every metric this schema can send, in the order it sends them: what ``[metrics]`` patterns match."""
MAX_COUNTER = 254
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


NAME_TAGS = frozenset({"namespace", "pod", "container", "slurm_job"})
"""Tags whose values are names a cluster's users choose: marked with a hash where sanitising changed them."""


def sanitize(value: str) -> str:
    return _UNSAFE.sub("_", value)


def tag_value(key: str, value: str) -> str:
    """The value as a tag: sanitised, and for a :data:`NAME_TAGS` name that sanitising changed,
    ``-`` and the original's short hash (two names must not meet in one tag set)."""
    clean = _UNSAFE.sub("_", value)
    if key not in NAME_TAGS or clean == value:
        return clean
    return f"{clean}-{_digest(value)}"


def _digest(value: str) -> str:
    import hashlib  # only for an odd or over-long tag: hashlib loads OpenSSL, a few ms of every plugin start

    return hashlib.blake2s(value.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()


def format_tags(metric: str, pairs: list[tuple[str, str]]) -> str:
    """``k=v,k=v`` with sanitised values, shortened until metric + tags fit. A tag with
    an empty value is left out (``container=`` would be a distinct, meaningless counter)."""
    clean = [(k, tag_value(k, v)) for k, v in pairs if v]
    tags = _joined(clean)
    while len(metric) + len(tags) > MAX_COUNTER:
        i = max(range(len(clean)), key=lambda j: len(clean[j][1]))
        k, v = clean[i]
        excess = len(metric) + len(tags) - MAX_COUNTER
        keep = max(len(v) - excess - 9, 1)
        if keep >= len(v) - 9:
            break  # nothing left to shorten; keys alone are too long (not reachable with our keys)
        clean[i] = (k, f"{v[:keep]}-{_digest(v)}")
        tags = _joined(clean)
    return tags


def _joined(clean: list[tuple[str, str]]) -> str:
    return ",".join(f"{k}={v}" for k, v in clean)


class _Items:
    def __init__(self, cycle: CycleData, chosen: frozenset[str] | None) -> None:
        self.endpoint = sanitize(cycle.node)
        self.ts = int(cycle.snapshot.timestamp)
        self.step = cycle.step
        self.extra = list(cycle.extra_labels)
        """The ``labels`` setting: extra tags on every item."""
        self.items: list[FalconItem] = []
        self.chosen = chosen
        """The metrics the ``[metrics]`` table keeps (None: all): another one is never built."""
        self._last_tags: list[tuple[str, str]] | None = None
        self._last_joined = ""
        """The tags of the last call, formatted: one device's items share one list, formatted once
        (callers build a new list for other tags, never change one they passed)."""

    def add(self, metric: str, value: float | int | bool | None, tags: list[tuple[str, str]]) -> None:
        if value is None or not math.isfinite(value):
            return  # JSON has no NaN/Inf: falcon-agent would drop the whole plugin output
        if self.chosen is not None and metric not in self.chosen:
            return
        self.items.append(
            FalconItem(
                self.endpoint,
                metric,
                self.ts,
                self.step,
                round(float(value), 4),
                "GAUGE",
                self._tags(metric, tags),
            )
        )

    def _tags(self, metric: str, tags: list[tuple[str, str]]) -> str:
        pairs = tags + self.extra if self.extra else tags
        if tags is not self._last_tags:
            self._last_tags = tags
            self._last_joined = _joined([(k, tag_value(k, v)) for k, v in pairs if v])
        if len(metric) + len(self._last_joined) > MAX_COUNTER:
            return format_tags(metric, pairs)  # too long for this metric: shortened (rare)
        return self._last_joined


def _device(out: _Items, d: DeviceReading, tags: list[tuple[str, str]]) -> None:
    for metric, convert, value in BOARD_SERIES.rows(d):
        if value is not None:
            out.add(metric, convert(value), tags)
    if d.ecc is not None:
        out.add("SingleBitError", d.ecc.corrected_aggregate, tags)
        out.add("DoubleBitError", d.ecc.uncorrected_aggregate, tags)
    if d.retired_pages is not None:
        out.add("RPSingleError", d.retired_pages.single_bit, tags)
        out.add("RPDoubleError", d.retired_pages.double_bit, tags)
    if d.gpm is not None:
        for metric, attr in _GPM:
            value = getattr(d.gpm, attr)
            out.add(metric, None if value is None else _PERCENT(value), tags)
    for metric, convert, value in INTERCONNECT_SERIES.rows(d):
        if value is not None:
            out.add(metric, convert(value), tags)
    if d.fabric is not None:
        for metric, number in fabric.openfalcon_items(d.fabric):
            out.add(metric, number, tags)


def _rollup(out: _Items, metric: str, values: list[float]) -> None:
    if values:
        out.add(metric, sum(values), [("type", "sum")])
        out.add(metric, sum(values) / len(values), [("type", "ave")])


def render(cycle: CycleData, selection: MetricSelection = EVERYTHING) -> tuple[FalconItem, ...]:
    out = _Items(cycle, selection.chosen(NAMES))
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
    for metric, get, convert in _ROLLUPS:
        _rollup(out, metric, [convert(v) for d in up if (v := get(d)) is not None])
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
        out.add("PodGPUUtils", None if util is None else _PERCENT(min(util, 1.0)), tags)
        out.add("PodFBUsed", _TO_MIB(use.memory_used_bytes), tags)
        out.add("PodProcesses", use.processes, tags)
    for box in cycle.attribution.containers:  # plain containers: CONTRACT section 5, issue 13
        if box.gpu_uuid not in index:
            continue
        tags = [("GpuId", str(index[box.gpu_uuid])), ("container", box.name)]
        util = box.utilization_ratio
        out.add("ContainerGPUUtils", None if util is None else _PERCENT(min(util, 1.0)), tags)
        out.add("ContainerFBUsed", _TO_MIB(box.memory_used_bytes), tags)
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
        out.add("SlurmJobGPUUtils", None if util is None else _PERCENT(min(util, 1.0)), tags)
        out.add("SlurmJobFBUsed", _TO_MIB(memory), tags)
    for metric, value, tags in openfalcon_jobs.items(cycle.jobs_finished):
        out.add(metric, value, tags)
    return tuple(out.items)
