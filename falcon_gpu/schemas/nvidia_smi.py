"""The ``nvidia_smi`` Prometheus schema: nvidia_gpu_exporter's names, units and labels.

So that the dashboards built for utkuozdemir/nvidia_gpu_exporter (grafana.com 14574, the single-GPU
detail, and 25547, the node overview) and the alerts written against it work unchanged. That exporter
turns each ``nvidia-smi --query-gpu`` field into ``nvidia_smi_<field, dots as underscores>`` and
converts the unit its CSV header names: ``[%]`` -> ``_ratio`` (0-1), ``[MiB]`` -> ``_bytes``,
``[MHz]`` -> ``_clock_hz``, ``[W]`` -> ``_watts``; a field without a unit keeps its number (the
temperatures, in degrees C). Enabled/Active states are 1/0. Its NVML backend adds
``energy_joules_total``, ``pcie_throughput_*_bytes_per_second``, ``xid_errors_total`` and the
``mig_*`` families. This schema publishes those of them that falcon_gpu reads, and nothing it does
not: a field falcon_gpu has no reading for (``compute_mode``, ``clocks.max.*``,
``gpu_recovery_action``, ...) is absent, as it is upstream on a GPU that lacks it.

Labels as upstream: every per-GPU series has ``uuid`` alone, nvidia-smi's UUID lower-cased without
its ``GPU-`` prefix, and ``nvidia_smi_gpu_info`` carries the identity (``name``, ``index``,
``driver_version``, ``cuda_version``, ``pci_bus_id``) for dashboards to join on ``uuid``; ``job``
and ``instance`` come from the sink (remote_write) or the scrape (``listen``). The ``labels``
setting rides on every device series.

Pods ride on the identity series: as in the ``dcgm`` schema, a GPU allocated to exactly one container
has its ``pod``, ``namespace`` and ``container`` (and ``hpc_job`` for one Slurm job) on
``nvidia_smi_gpu_info``, a MIG device its own on ``nvidia_smi_mig_info``; a shared GPU, or a
MIG-enabled board, has none. A query takes them with ``* on(uuid) group_left(pod, namespace)
nvidia_smi_gpu_info``. Not on the readings themselves: the dashboards' n/a idiom, ``(reading) or
(sum by(uuid, instance, job) (nvidia_smi_gpu_info) * 0 - 1)``, keeps a GPU's reading only where the
reading's labels are exactly ``uuid``, ``instance`` and ``job``, and would show an allocated GPU twice.
The agent's own series, the pod series and the policy series are kept, under their falcon_gpu names.
"""

from __future__ import annotations

from typing import Final

from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.samples import Labels, PromBatch
from falcon_gpu.model.snapshot import CLOCK_EVENT_REASONS, DeviceReading, GpmReading
from falcon_gpu.readings.device import READINGS
from falcon_gpu.schemas import agent, falcon_gpu_pod, falcon_gpu_policy
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec, without_empty
from falcon_gpu.schemas.dcgm import GpuInstance, Owners, gpu_instances
from falcon_gpu.schemas.kept import SchemaCaches
from falcon_gpu.schemas.label_cache import LabelCache
from falcon_gpu.schemas.scalars import ScalarSeries
from falcon_gpu.schemas.selection import EVERYTHING, MetricSelection

N: Final = "nvidia_smi_"
SCALARS = ScalarSeries(READINGS, "nvidia_smi")
"""The scalar readings under nvidia_gpu_exporter's names and units, from the reading table."""

REASONS: Final[tuple[tuple[str, str], ...]] = (
    ("idle", "gpu_idle"),
    ("applications_clocks", "applications_clocks_setting"),
    ("sw_power_cap", "sw_power_cap"),
    ("hw_slowdown", "hw_slowdown"),
    ("sync_boost", "sync_boost"),
    ("sw_thermal", "sw_thermal_slowdown"),
    ("hw_thermal", "hw_thermal_slowdown"),
    ("hw_power_brake", "hw_power_brake_slowdown"),
)
"""falcon_gpu's clock-event reason -> nvidia-smi's ``clocks_event_reasons.<name>`` (display clocks:
nvidia-smi has no field for it, it counts in ``clocks_event_reasons.active`` only)."""
_REASON_NAMES: Final = tuple(N + "clocks_event_reasons_" + name for _, name in REASONS)

_MIG_GPM: Final[tuple[tuple[str, str], ...]] = (
    ("graphics_active", "graphics_activity"),
    ("sm_active", "sm_activity"),
    ("sm_occupancy", "sm_occupancy"),
    ("tensor_active", "tensor_activity"),
)
"""(GpmReading field, upstream's ``nvidia_smi_mig_<name>_ratio``): a GPU instance's GPM ratios."""

_INFO_HELP = (
    "A metric with a constant '1' value labeled by gpu uuid, name, index, pci_bus_id, driver_version, "
    "cuda_version."
)
_SPECS_BEFORE: tuple[MetricSpec, ...] = (
    MetricSpec(N + "gpu_info", "gauge", _INFO_HELP),
    MetricSpec(N + "index", "gauge", "index: the GPU's NVML index."),
    MetricSpec(N + "mig_mode_current", "gauge", "mig.mode.current: 1 enabled, 0 disabled."),
)


def _gauge(name: str, help: str) -> MetricSpec:
    return MetricSpec(N + name, "gauge", help)


_ONE = "A metric with a constant '1' value labeled by the identity of "
_SPECS_AFTER: tuple[MetricSpec, ...] = (
    _gauge("ecc_errors_corrected_volatile_total", "ecc.errors.corrected.volatile.total"),
    _gauge("ecc_errors_uncorrected_volatile_total", "ecc.errors.uncorrected.volatile.total"),
    _gauge("ecc_errors_corrected_aggregate_total", "ecc.errors.corrected.aggregate.total"),
    _gauge("ecc_errors_uncorrected_aggregate_total", "ecc.errors.uncorrected.aggregate.total"),
    _gauge("retired_pages_single_bit_ecc_count", "retired_pages.single_bit_ecc.count"),
    _gauge("retired_pages_double_bit_count", "retired_pages.double_bit.count"),
    _gauge("retired_pages_pending", "retired_pages.pending: 1 yes, 0 no."),
    _gauge("remapped_rows_correctable", "remapped_rows.correctable"),
    _gauge("remapped_rows_uncorrectable", "remapped_rows.uncorrectable"),
    _gauge("remapped_rows_pending", "remapped_rows.pending: 1 yes, 0 no."),
    _gauge("remapped_rows_failure", "remapped_rows.failure: 1 yes, 0 no."),
    _gauge("clocks_event_reasons_active", "clocks_event_reasons.active: NVML's bitmask."),
    *(
        _gauge(f"clocks_event_reasons_{name}", f"clocks_event_reasons.{name}: 1 active, 0 not.")
        for _, name in REASONS
    ),
    _gauge("fabric_state", "fabric.state: 0 not supported, 1 not started, 2 in progress, 3 completed."),
    MetricSpec(N + "xid_errors_total", "counter", "XID error events observed since the agent started."),
    _gauge("mig_info", _ONE + "a MIG device."),
    _gauge("mig_memory_total_bytes", "The MIG GPU instance's framebuffer memory."),
    _gauge("mig_memory_used_bytes", "The MIG GPU instance's framebuffer memory used."),
    _gauge("mig_memory_free_bytes", "The MIG GPU instance's framebuffer memory free."),
    *(_gauge(f"mig_{name}_ratio", f"The MIG GPU instance's {name} (GPM).") for _, name in _MIG_GPM),
    _gauge("compute_app_info", _ONE + "a process with a compute context on a GPU."),
    _gauge("compute_app_used_memory_bytes", "GPU memory used by the process."),
    _gauge("compute_apps", "Number of processes with a compute context on the GPU."),
    _gauge(
        "compute_apps_last_collect_success",
        "Whether the most recent per-process collection succeeded (1) or not (0).",
    ),
    _gauge("last_collect_success", "Whether the most recent collection succeeded (1) or not (0)."),
)
SPECS: tuple[MetricSpec, ...] = (
    _SPECS_BEFORE
    + SCALARS.specs
    + _SPECS_AFTER
    + falcon_gpu_policy.SPECS
    + falcon_gpu_pod.SPECS
    + agent.SPECS
)


def smi_uuid(uuid: str) -> str:
    """nvidia_gpu_exporter's ``uuid`` label: nvidia-smi's ``GPU-…`` lower-cased, without ``gpu-``."""
    lowered = uuid.lower()
    return lowered[4:] if lowered.startswith("gpu-") else lowered


DeviceKey = tuple[str, Labels]
"""The GPU's UUID and the ``labels`` setting: its series' labels."""
InfoKey = tuple[Labels, str, int, str, str, str]
"""A GPU's labels, name, index, PCI bus id, driver and CUDA version: its ``gpu_info`` labels."""


def _info_labels(k: InfoKey) -> Labels:
    labels, name, index, pci_bus_id, driver, cuda = k
    return without_empty(
        (
            *labels,
            ("name", name),
            ("index", str(index)),
            ("pci_bus_id", pci_bus_id),
            ("driver_version", driver),
            ("cuda_version", cuda),
        )
    )


def _reason_mask(active: frozenset[str]) -> int:
    return sum(1 << i for i, r in enumerate(CLOCK_EVENT_REASONS) if r in active)


class Caches(SchemaCaches):
    """What a renderer keeps across cycles in this schema (:mod:`falcon_gpu.schemas.kept`)."""

    __slots__ = ("device", "extended", "info", "masks")

    def __init__(self) -> None:
        super().__init__()
        self.device: LabelCache[DeviceKey, Labels] = LabelCache(
            lambda k: without_empty((("uuid", smi_uuid(k[0])), *k[1]))
        )
        self.extended: LabelCache[tuple[Labels, Labels], Labels] = LabelCache(
            lambda k: without_empty((*k[0], *k[1]))
        )
        """(a GPU's labels, what a series adds: its pod, GPU instance, XID, process) -> the series' labels."""
        self.info: LabelCache[InfoKey, Labels] = LabelCache(_info_labels)
        self.masks: LabelCache[frozenset[str], int] = LabelCache(_reason_mask)
        """A set of active clock-event reasons -> NVML's bitmask of them (``clocks_event_reasons.active``)."""


def _structured(b: FamilyBuilder, lb: Labels, d: DeviceReading, kept: Caches) -> None:
    if d.ecc is not None:
        b.put(N + "ecc_errors_corrected_volatile_total", lb, d.ecc.corrected_volatile)
        b.put(N + "ecc_errors_uncorrected_volatile_total", lb, d.ecc.uncorrected_volatile)
        b.put(N + "ecc_errors_corrected_aggregate_total", lb, d.ecc.corrected_aggregate)
        b.put(N + "ecc_errors_uncorrected_aggregate_total", lb, d.ecc.uncorrected_aggregate)
    if d.retired_pages is not None:
        b.put(N + "retired_pages_single_bit_ecc_count", lb, d.retired_pages.single_bit)
        b.put(N + "retired_pages_double_bit_count", lb, d.retired_pages.double_bit)
        b.put(N + "retired_pages_pending", lb, d.retired_pages.pending)
    if d.remapped_rows is not None:
        b.put(N + "remapped_rows_correctable", lb, d.remapped_rows.correctable)
        b.put(N + "remapped_rows_uncorrectable", lb, d.remapped_rows.uncorrectable)
        b.put(N + "remapped_rows_pending", lb, d.remapped_rows.pending)
        b.put(N + "remapped_rows_failure", lb, d.remapped_rows.failed)
    active = d.clock_event_reasons
    if active is not None:
        b.put(N + "clocks_event_reasons_active", lb, kept.masks.get(active))
        for name, (reason, _) in zip(_REASON_NAMES, REASONS, strict=True):
            b.put(name, lb, reason in active)
    if d.fabric is not None:
        b.put(N + "fabric_state", lb, d.fabric.state)


def _xids(b: FamilyBuilder, lb: Labels, d: DeviceReading, kept: Caches) -> None:
    for xid, n in sorted(d.xid_counts.items()):
        b.put(N + "xid_errors_total", kept.extended.get((lb, (("xid", str(xid)),))), n)


def _processes(b: FamilyBuilder, lb: Labels, d: DeviceReading, kept: Caches) -> None:
    """Upstream's ``--collect.compute-apps`` families (``process_metrics = true`` here)."""
    compute = [p for p in d.processes if "compute" in p.types]
    for p in compute:
        plb = kept.extended.get((lb, (("pid", str(p.pid)), ("process_name", p.name or ""))))
        b.put(N + "compute_app_info", plb, 1)
        b.put(N + "compute_app_used_memory_bytes", plb, p.used_memory_bytes)
    b.put(N + "compute_apps", lb, len(compute))


def _mig(b: FamilyBuilder, gpu: Labels, d: DeviceReading, owners: Owners, kept: Caches) -> None:
    """Per MIG device its identity (with its pod); per GPU instance its memory and GPM ratios."""
    for m in d.mig:
        identity = (
            ("mig_uuid", m.uuid),
            ("gpu_instance_id", str(m.gpu_instance_id)),
            ("compute_instance_id", str(m.compute_instance_id)),
            ("profile", m.profile),
        )
        b.put(N + "mig_info", kept.extended.get((gpu, (*identity, *owners.labels((m.uuid,))))), 1)
    for gi in gpu_instances(d):
        _instance(b, kept.extended.get((gpu, (("gpu_instance_id", str(gi.id)),))), gi)


def _instance(b: FamilyBuilder, lb: Labels, gi: GpuInstance) -> None:
    used, free = gi.memory_used_bytes, gi.memory_free_bytes
    b.put(N + "mig_memory_used_bytes", lb, used)
    b.put(N + "mig_memory_free_bytes", lb, free)
    b.put(N + "mig_memory_total_bytes", lb, None if used is None or free is None else used + free)
    gpm: GpmReading | None = gi.gpm
    if gpm is not None:
        for attr, name in _MIG_GPM:
            b.put(N + f"mig_{name}_ratio", lb, getattr(gpm, attr))


NAMES = tuple(spec.name for spec in SPECS)


def render(
    cycle: CycleData, selection: MetricSelection = EVERYTHING, kept: Caches | None = None
) -> PromBatch:
    """``kept``: the renderer's caches (None: fresh ones, nothing kept from a previous cycle)."""
    if kept is None:
        kept = Caches()
    b = FamilyBuilder(SPECS, kept.memo, selection.chosen(NAMES))
    owners = Owners(cycle)
    snap = cycle.snapshot
    driver, cuda, extra = snap.driver_version or "", snap.cuda_version or "", cycle.extra_labels
    b.add(N + "last_collect_success", cycle.base_labels, snap.nvml_ok)
    processes = cycle.telemetry.readers.get("processes") if cycle.process_metrics else None
    if processes is not None:
        b.add(N + "compute_apps_last_collect_success", cycle.base_labels, processes[0])
    for dev in snap.devices:
        lb = kept.device.get((dev.uuid, extra))
        owner = lb if dev.mig_enabled else kept.extended.get((lb, owners.labels((dev.uuid,))))
        b.put(N + "gpu_info", kept.info.get((owner, dev.name, dev.index, dev.pci_bus_id, driver, cuda)), 1)
        b.put(N + "index", lb, dev.index)
        _xids(b, lb, dev, kept)
        if not dev.up:
            continue
        b.put(N + "mig_mode_current", lb, dev.mig_enabled)
        SCALARS.add_to(b, lb, dev)
        _structured(b, lb, dev, kept)
        if dev.mig_enabled:
            _mig(b, lb, dev, owners, kept)
        if cycle.process_metrics:
            _processes(b, lb, dev, kept)
    falcon_gpu_policy.add_policies(b, cycle, kept.devices)
    falcon_gpu_pod.add_pods(b, cycle, falcon_gpu_pod.DeviceIndex(snap.devices, kept.devices), kept.pods)
    agent.add_agent(b, cycle, kept.agent)
    return PromBatch(timestamp_ms=int(snap.timestamp * 1000), families=b.families())
