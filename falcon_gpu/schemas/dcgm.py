"""The ``dcgm`` Prometheus schema: the same readings under dcgm-exporter's names and labels.

So that dashboards and alerts built for dcgm-exporter work unchanged. Units
follow dcgm-exporter (percent, MiB, MHz, millijoules), not base units. Like
dcgm-exporter's Kubernetes mode, a device series carries ``pod``, ``namespace``
and ``container`` of the one container the kubelet allocated it to; a GPU shared
by several containers (or none) carries no pod labels, and the per-pod numbers
live in the ``falcon_gpu_pod_*`` series, which this schema keeps. Like its HPC mode, a
device series of a GPU (or GPU instance) used by exactly one Slurm job carries ``hpc_job``
(the job ID; several jobs on one device: none).

A MIG-enabled GPU is reported per GPU instance where the reading is the
instance's own, as dcgm-exporter does: ``FB_USED`` and ``FB_FREE`` carry
``GPU_I_PROFILE`` (``"3g.40gb"``) and ``GPU_I_ID`` (NVML's GPU instance id) and the
pod of the container allocated *that* instance. Readings of the whole board
(temperature, power, clocks, energy, ECC, XID, ...) come once per GPU, without
``GPU_I_*`` and without pod labels. dcgm-exporter instead repeats them on every
instance's series, which charges the whole board's power to each slice's pod and
makes ``sum(DCGM_FI_DEV_POWER_USAGE)`` count a GPU once per instance; here no
whole-GPU series carries one slice's pod, and sums over GPUs count each GPU once.
Compute instances of one GPU instance share its memory, so they are one series;
a MIG-enabled GPU with no instances yet reports its own memory.

GPM readings (Hopper and later) are ``DCGM_FI_PROF_*`` ratios 0-1, as dcgm-exporter's: per GPU,
and on a MIG-enabled GPU per GPU instance (with ``GPU_I_*`` and the instance's pod, the way
dcgm-exporter reports profiling there). ``DCGM_FI_PROF_PCIE_TX/RX_BYTES`` and
``..._NVLINK_TX/RX_BYTES`` are bytes per second between two cycles (absent on the first and
over a counter reset); ``DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL`` is the NVLink data counter of
all links, TX + RX, in bytes, and the NVLink error totals are summed over the links.

``XID_ERRORS`` is the most recent XID since the agent started (0: none), with
``err_code`` and ``err_msg`` (NVIDIA's description, :mod:`xid_catalog`).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from falcon_gpu.model.attribution import ContainerRef
from falcon_gpu.model.cycle import CycleData, HealthReport
from falcon_gpu.model.samples import Labels, PromBatch
from falcon_gpu.model.snapshot import CLOCK_EVENT_REASONS, DeviceReading, GpmReading, MigReading
from falcon_gpu.readings.device import BOARD, BY_FIELD, INTERCONNECT, READINGS
from falcon_gpu.schemas import agent, fabric, falcon_gpu_pod, falcon_gpu_policy, profiles
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec, without_empty
from falcon_gpu.schemas.kept import SchemaCaches
from falcon_gpu.schemas.label_cache import LabelCache
from falcon_gpu.schemas.scalars import ScalarSeries
from falcon_gpu.schemas.selection import EVERYTHING, MetricSelection
from falcon_gpu.schemas.xid_catalog import xid_message

F = "DCGM_FI_DEV_"
SCALARS = ScalarSeries(READINGS, "dcgm")
"""The scalar readings under dcgm-exporter's names and units (from the reading table), rendered in one
pass per GPU: the board's, and PCIe / NVLink rates as DCGM's profiling fields (bytes per second)."""
_FB_USED, _FB_FREE = SCALARS.names["memory_used_bytes"], SCALARS.names["memory_free_bytes"]
_TO_MIB = BY_FIELD["memory_used_bytes"].to_schema("dcgm")
"""Per GPU or per GPU instance (``_memory``): the table declares FB_USED/FB_FREE as the schema's own."""

_G: tuple[tuple[str, str], ...] = (
    ("XID_ERRORS", "Value of the last XID error encountered."),
    ("RETIRED_SBE", "Total number of retired pages due to single-bit errors."),
    ("RETIRED_DBE", "Total number of retired pages due to double-bit errors."),
    ("RETIRED_PENDING", "Pages pending retirement."),
    ("CORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for correctable errors."),
    ("UNCORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for uncorrectable errors."),
    ("ROW_REMAP_FAILURE", "Whether remapping of rows has failed."),
    ("CLOCK_THROTTLE_REASONS", "Current clock throttle reasons (bitmask)."),
)
_C: tuple[tuple[str, str], ...] = (
    ("ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors."),
    ("ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors."),
    ("ECC_SBE_AGG_TOTAL", "Total number of single-bit persistent ECC errors."),
    ("ECC_DBE_AGG_TOTAL", "Total number of double-bit persistent ECC errors."),
)
_C += (
    ("NVLINK_BANDWIDTH_TOTAL", "Total number of NVLink bandwidth counters for all lanes (bytes, TX + RX)."),
    ("NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "Total number of NVLink flow-control CRC errors."),
    ("NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "Total number of NVLink data CRC errors."),
    ("NVLINK_REPLAY_ERROR_COUNT_TOTAL", "Total number of NVLink retries."),
    ("NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "Total number of NVLink recovery errors."),
)
PROF = "DCGM_FI_PROF_"
_PROF_GPM: tuple[tuple[str, str, str], ...] = (
    ("sm_active", "SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned."),
    ("sm_occupancy", "SM_OCCUPANCY", "The ratio of number of warps resident on an SM."),
    ("tensor_active", "PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active."),
    (
        "dram_active",
        "DRAM_ACTIVE",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    ("graphics_active", "GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active."),
    ("fp64_active", "PIPE_FP64_ACTIVE", "Ratio of cycles the fp64 pipes are active."),
    ("fp32_active", "PIPE_FP32_ACTIVE", "Ratio of cycles the fp32 pipes are active."),
    ("fp16_active", "PIPE_FP16_ACTIVE", "Ratio of cycles the fp16 pipes are active."),
)
"""(GpmReading field, dcgm-exporter name after ``DCGM_FI_PROF_``, its help): ratios 0-1 as dcgm-exporter's."""
SPECS: tuple[MetricSpec, ...] = (
    SCALARS.specs_of("gauge", BOARD)
    + tuple(MetricSpec(F + n, "gauge", h) for n, h in _G)
    + fabric.DCGM_SPECS
    + SCALARS.specs_of("counter", BOARD)
    + tuple(MetricSpec(F + n, "counter", h) for n, h in _C)
    + tuple(MetricSpec(PROF + n, "gauge", h) for _, n, h in _PROF_GPM)
    + SCALARS.specs_of(readings=INTERCONNECT)
    + falcon_gpu_policy.SPECS
    + falcon_gpu_pod.SPECS
    + agent.SPECS
)


_COMPUTE_PREFIX = re.compile(r"^\d+c\.")
"""A compute instance's MIG device name adds ``<n>c.`` to its GPU instance's profile."""


class GpuInstance(NamedTuple):
    """One MIG GPU instance: its compute instances' MIG devices share its memory."""

    id: int
    profile: str
    mig_uuids: tuple[str, ...]
    memory_used_bytes: int | None
    memory_free_bytes: int | None
    gpm: GpmReading | None = None


def gpu_instances(dev: DeviceReading) -> tuple[GpuInstance, ...]:
    """The GPU instances of a MIG-enabled GPU, in NVML's order, from its MIG device readings."""
    grouped: dict[int, list[MigReading]] = {}
    for m in dev.mig:
        grouped.setdefault(m.gpu_instance_id, []).append(m)
    return tuple(_instance(gi, readings) for gi, readings in grouped.items())


def _instance(gi: int, readings: list[MigReading]) -> GpuInstance:
    first = readings[0]  # every compute instance of a GPU instance reports the same memory
    used, total = first.memory_used_bytes, first.memory_total_bytes
    free = None if used is None or total is None else max(total - used, 0)
    profile = _COMPUTE_PREFIX.sub("", first.profile)
    return GpuInstance(gi, profile, tuple(m.uuid for m in readings), used, free, first.gpm)


class Owners:
    """Device key (GPU uuid, or MIG uuid) -> the containers the kubelet allocated it to, and
    the Slurm jobs whose processes run on it."""

    def __init__(self, cycle: CycleData) -> None:
        self._by_key: dict[str, set[ContainerRef]] = {}
        for use in cycle.attribution.pods:
            if use.allocated:
                self._by_key.setdefault(use.mig_uuid or use.gpu_uuid, set()).add(use.container)
        self._jobs: dict[str, set[str]] = {}
        for job in cycle.attribution.slurm_jobs:
            self._jobs.setdefault(job.mig_uuid or job.gpu_uuid, set()).add(job.job)

    def labels(self, keys: tuple[str, ...]) -> Labels:
        """``container``, ``namespace``, ``pod`` of the one container holding ``keys`` (none if
        shared), and ``hpc_job`` of the one Slurm job on them (none if several)."""
        found = set().union(*(self._by_key.get(k, set()) for k in keys))
        jobs = set().union(*(self._jobs.get(k, set()) for k in keys)) if self._jobs else set()
        hpc: Labels = (("hpc_job", next(iter(jobs))),) if len(jobs) == 1 else ()
        if len(found) != 1:
            return hpc
        (c,) = found
        return (("container", c.container), ("namespace", c.namespace), ("pod", c.pod), *hpc)


BaseKey = tuple[str, int, str, str, str, str, Labels]
"""Node, index, UUID, model, PCI bus id, driver version, the ``labels`` setting: a GPU's labels."""


def _base_labels(key: BaseKey) -> Labels:
    node, index, uuid, name, pci_bus_id, driver, extra = key
    return without_empty(
        (
            ("gpu", str(index)),
            ("UUID", uuid),
            ("device", f"nvidia{index}"),
            ("modelName", name),
            ("Hostname", node),
            ("pci_bus_id", pci_bus_id),
            ("DCGM_FI_DRIVER_VERSION", driver),
            *extra,
        )
    )


def _xid_labels(code: int) -> Labels:
    return (("err_code", str(code)), ("err_msg", xid_message(code)))


def _reason_mask(active: frozenset[str]) -> int:
    return sum(1 << i for i, r in enumerate(CLOCK_EVENT_REASONS) if r in active)


class Caches(SchemaCaches):
    """What a renderer keeps across cycles in this schema (:mod:`falcon_gpu.schemas.kept`)."""

    __slots__ = ("bases", "extended", "masks", "xid")

    def __init__(self) -> None:
        super().__init__()
        self.bases: LabelCache[BaseKey, Labels] = LabelCache(_base_labels)
        """Per GPU identity, its labels: the same tuple every cycle."""
        self.extended: LabelCache[tuple[Labels, Labels], Labels] = LabelCache(
            lambda k: without_empty((*k[0], *k[1]))
        )
        """(a GPU's labels, what a series adds: its pod, its GPU instance, its XID) -> the series' labels."""
        self.xid: LabelCache[int, Labels] = LabelCache(_xid_labels)
        self.masks: LabelCache[frozenset[str], int] = LabelCache(_reason_mask)
        """A set of active clock-event reasons -> dcgm-exporter's bitmask of them."""


def _memory(b: FamilyBuilder, lb: Labels, used: int | None, free: int | None) -> None:
    if used is not None:
        b.put(_FB_USED, lb, _TO_MIB(used))
    if free is not None:
        b.put(_FB_FREE, lb, _TO_MIB(free))


def _xid(b: FamilyBuilder, lb: Labels, dev: DeviceReading, health: HealthReport | None, kept: Caches) -> None:
    last = health.last_xid if health else None
    code = last if last is not None else (0 if dev.up else None)
    if code is not None:
        b.put(F + "XID_ERRORS", kept.extended.get((lb, kept.xid.get(code))), code)


def _device(b: FamilyBuilder, lb: Labels, d: DeviceReading, kept: Caches) -> None:
    """Readings of the whole board (memory is added by the caller: per GPU or per GPU instance).

    ``lb`` and every label tuple of this module's device series come from a :class:`LabelCache` with
    their empty values left out, so they are ``put``."""
    SCALARS.add_to(b, lb, d)
    if d.ecc is not None:
        b.put(F + "ECC_SBE_VOL_TOTAL", lb, d.ecc.corrected_volatile)
        b.put(F + "ECC_DBE_VOL_TOTAL", lb, d.ecc.uncorrected_volatile)
        b.put(F + "ECC_SBE_AGG_TOTAL", lb, d.ecc.corrected_aggregate)
        b.put(F + "ECC_DBE_AGG_TOTAL", lb, d.ecc.uncorrected_aggregate)
    if d.retired_pages is not None:
        b.put(F + "RETIRED_SBE", lb, d.retired_pages.single_bit)
        b.put(F + "RETIRED_DBE", lb, d.retired_pages.double_bit)
        b.put(F + "RETIRED_PENDING", lb, d.retired_pages.pending)
    if d.remapped_rows is not None:
        b.put(F + "CORRECTABLE_REMAPPED_ROWS", lb, d.remapped_rows.correctable)
        b.put(F + "UNCORRECTABLE_REMAPPED_ROWS", lb, d.remapped_rows.uncorrectable)
        b.put(F + "ROW_REMAP_FAILURE", lb, d.remapped_rows.failed)
    if d.clock_event_reasons is not None:
        b.put(F + "CLOCK_THROTTLE_REASONS", lb, kept.masks.get(d.clock_event_reasons))
    if d.fabric is not None:
        fabric.add_dcgm(b, lb, d.fabric, kept.devices.fabric)
    _interconnect(b, lb, d)


def _interconnect(b: FamilyBuilder, lb: Labels, d: DeviceReading) -> None:
    """NVLink totals of the whole board as counters (the rates come with the table's scalars)."""
    tx, rx = d.nvlink_tx_bytes, d.nvlink_rx_bytes
    b.put(F + "NVLINK_BANDWIDTH_TOTAL", lb, None if tx is None and rx is None else (tx or 0) + (rx or 0))
    errors = d.nvlink_errors
    if errors is not None:
        b.put(F + "NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", lb, errors.crc_flit)
        b.put(F + "NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", lb, errors.crc_data)
        b.put(F + "NVLINK_REPLAY_ERROR_COUNT_TOTAL", lb, errors.replay)
        b.put(F + "NVLINK_RECOVERY_ERROR_COUNT_TOTAL", lb, errors.recovery)


def _gpm(b: FamilyBuilder, lb: Labels, gpm: GpmReading | None) -> None:
    if gpm is not None:
        for attr, name, _ in _PROF_GPM:
            b.put(PROF + name, lb, getattr(gpm, attr))


NAMES = tuple(spec.name for spec in SPECS)
LEAN = profiles.lean_set(NAMES)
"""The default profile: dcgm-exporter's default counters, and the ``falcon_gpu_*`` default families."""


def render(
    cycle: CycleData, selection: MetricSelection = EVERYTHING, kept: Caches | None = None
) -> PromBatch:
    """``kept``: the renderer's caches (None: fresh ones, nothing kept from a previous cycle)."""
    if kept is None:
        kept = Caches()
    b = FamilyBuilder(SPECS, kept.memo, selection.chosen(NAMES, LEAN))
    bases, extended = kept.bases.get, kept.extended.get
    owners = Owners(cycle)
    node, driver, extra = cycle.node, cycle.snapshot.driver_version or "", cycle.extra_labels
    for dev in cycle.snapshot.devices:
        base = bases((node, dev.index, dev.uuid, dev.name, dev.pci_bus_id, driver, extra))
        instances = gpu_instances(dev) if dev.mig_enabled else ()
        whole = base if dev.mig_enabled else extended((base, owners.labels((dev.uuid,))))
        _xid(b, whole, dev, cycle.health.get(dev.uuid), kept)
        if not dev.up:
            continue
        _device(b, whole, dev, kept)
        if not instances:
            _memory(b, whole, dev.memory_used_bytes, dev.memory_free_bytes)
            _gpm(b, whole, dev.gpm)
        for gi in instances:
            lb = extended(
                (
                    base,
                    (("GPU_I_PROFILE", gi.profile), ("GPU_I_ID", str(gi.id)), *owners.labels(gi.mig_uuids)),
                )
            )
            _memory(b, lb, gi.memory_used_bytes, gi.memory_free_bytes)
            _gpm(b, lb, gi.gpm)
    falcon_gpu_policy.add_policies(b, cycle, kept.devices)
    falcon_gpu_pod.add_pods(
        b, cycle, falcon_gpu_pod.DeviceIndex(cycle.snapshot.devices, kept.devices), kept.pods
    )
    agent.add_agent(b, cycle, kept.agent)
    return PromBatch(timestamp_ms=int(cycle.snapshot.timestamp * 1000), families=b.families())
