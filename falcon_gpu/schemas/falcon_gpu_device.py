"""Device-level series of the ``falcon_gpu`` Prometheus schema (CONTRACT section 3).

The scalar readings' series come from the reading table (:mod:`falcon_gpu.readings.device`);
what is written here is the structured ones (ECC, pages, rows, clock events, GPM, NVLink errors,
MIG instances) and the order of the families.

``sparse`` (the default profile, :mod:`falcon_gpu.schemas.profiles`): the structured error and
health series are added only while not 0, and ``health_worst`` sums the checks up per GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import attrgetter

from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.samples import Labels
from falcon_gpu.model.snapshot import (
    CLOCK_EVENT_REASONS,
    GPM_METRICS,
    NVLINK_ERROR_TYPES,
    DeviceReading,
    GpmReading,
    MigReading,
)
from falcon_gpu.readings.device import BOARD, INTERCONNECT, READINGS
from falcon_gpu.schemas import fabric
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec, RowBlock, without_empty
from falcon_gpu.schemas.label_cache import Kept, LabelCache
from falcon_gpu.schemas.scalars import ScalarSeries

P = "falcon_gpu_"
SCALARS = ScalarSeries(READINGS, "falcon_gpu")
"""The scalar readings (utilisation, memory, temperatures, power, clocks, traffic, ...): from the table,
rendered in one pass per GPU; their families go where SPECS places BOARD and INTERCONNECT."""

SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(P + "info", "gauge", "GPU identity; value is always 1."),
    MetricSpec(P + "up", "gauge", "1 when the GPU answered this cycle, 0 when lost or failing."),
    *SCALARS.specs_of(readings=BOARD),
    MetricSpec(P + "ecc_errors_total", "counter", "ECC errors by type and scope."),
    MetricSpec(P + "retired_pages", "gauge", "Retired framebuffer pages by cause."),
    MetricSpec(P + "retired_pages_pending", "gauge", "1 when a page retirement waits for a GPU reset."),
    MetricSpec(P + "remapped_rows", "gauge", "Remapped memory rows by type."),
    MetricSpec(P + "remapped_rows_pending", "gauge", "1 when a row remap waits for a GPU reset."),
    MetricSpec(P + "remapped_rows_failed", "gauge", "1 when a row remap failed (replace the GPU)."),
    MetricSpec(P + "xid_errors_total", "counter", "XID error events seen since the agent started."),
    MetricSpec(P + "clock_event_active", "gauge", "1 while a clock event (throttle) reason is active."),
    MetricSpec(P + "health", "gauge", "Health check result: 0 pass, 1 warn, 2 fail."),
    MetricSpec(P + "health_worst", "gauge", "The worst health check of the GPU: 0 pass, 1 warn, 2 fail."),
    MetricSpec(
        P + "sm_active_ratio", "gauge", "GPM: fraction of time the SMs had a warp resident (Hopper+)."
    ),
    MetricSpec(P + "sm_occupancy_ratio", "gauge", "GPM: resident warps over the SMs' maximum (Hopper+)."),
    MetricSpec(P + "tensor_active_ratio", "gauge", "GPM: fraction of cycles any tensor pipe was active."),
    MetricSpec(P + "dram_active_ratio", "gauge", "GPM: DRAM bandwidth used over its peak."),
    MetricSpec(
        P + "graphics_active_ratio", "gauge", "GPM: fraction of time the graphics/compute engine was busy."
    ),
    MetricSpec(P + "fp64_active_ratio", "gauge", "GPM: fraction of cycles the FP64 pipe was active."),
    MetricSpec(P + "fp32_active_ratio", "gauge", "GPM: fraction of cycles the FP32 pipe was active."),
    MetricSpec(P + "fp16_active_ratio", "gauge", "GPM: fraction of cycles the FP16 pipe was active."),
    *SCALARS.specs_of(readings=INTERCONNECT),
    MetricSpec(P + "nvlink_errors_total", "counter", "NVLink errors per link and type."),
    *fabric.FALCON_GPU_SPECS,
)
GPM_SERIES: tuple[tuple[str, str], ...] = tuple(zip(GPM_METRICS, (
    P + "sm_active_ratio", P + "sm_occupancy_ratio", P + "tensor_active_ratio", P + "dram_active_ratio",
    P + "graphics_active_ratio", P + "fp64_active_ratio", P + "fp32_active_ratio", P + "fp16_active_ratio",
), strict=True))  # fmt: skip
"""(GpmReading field, series name)."""


_GPM_BLOCK = RowBlock(
    tuple(next(spec for spec in SPECS if spec.name == name) for _, name in GPM_SERIES),
    (float,) * len(GPM_SERIES),
)
"""The GPM series, one row per GPU and MIG instance that has GPM (builder.py)."""
_GPM_VALUES = attrgetter(*GPM_METRICS)
_ECC_LABELS = tuple((k, s) for k in ("corrected", "uncorrected") for s in ("volatile", "aggregate"))
_ECC_VALUES = attrgetter(*(f"{kind}_{scope}" for kind, scope in _ECC_LABELS))
"""ECC counters in the order the series are added, and their ``type``/``scope``."""
_NVLINK_VALUES = attrgetter(*NVLINK_ERROR_TYPES)
MigKey = tuple[int, int, str, str]
"""(GPU instance id, compute instance id, profile, MIG uuid): what a MIG device's labels say."""


class DeviceLabels(Kept):
    """The label tuples of one GPU's series (empty values left out), built once per identity:
    the GPU's (node labels, index, UUID, model), then per check, XID, link and MIG device on
    first use. A GPU whose identity changes gets a new ``DeviceLabels`` (see :class:`DeviceLabelSets`).

    Also the values of the GPU's groups of series that are the same across most cycles, kept with
    what they were made from: the health checks (:attr:`health`), per clock-event-reason set the
    0/1 of each reason (:attr:`reason_values`), each replaced whole (an immutable tuple)."""

    __slots__ = (
        "checks", "device", "ecc", "health", "info", "links", "migs", "reason_labels", "reason_values",
        "remapped", "retired", "xids",
    )  # fmt: skip

    def __init__(self, key: tuple[Labels, int, str, str]) -> None:
        base, index, uuid, name = key
        lb = self.device = without_empty((*base, ("gpu", str(index)), ("uuid", uuid), ("model", name)))
        self.ecc = tuple((*lb, ("type", kind), ("scope", scope)) for kind, scope in _ECC_LABELS)
        self.retired = ((*lb, ("cause", "single_bit")), (*lb, ("cause", "double_bit")))
        self.remapped = ((*lb, ("type", "correctable")), (*lb, ("type", "uncorrectable")))
        self.reason_labels = tuple((*lb, ("reason", reason)) for reason in CLOCK_EVENT_REASONS)
        self.reason_values: LabelCache[frozenset[str], tuple[float, ...]] = LabelCache(
            lambda active: tuple(float(reason in active) for reason in CLOCK_EVENT_REASONS)
        )
        """The set of active clock-event reasons -> each reason's value, in CLOCK_EVENT_REASONS order."""
        self.info: LabelCache[tuple[str, str, str], Labels] = LabelCache(
            lambda k: without_empty(
                (*lb, ("driver_version", k[0]), ("cuda_version", k[1]), ("pci_bus_id", k[2]))
            ),
        )
        """(driver version, CUDA version, PCI bus id) -> the ``info`` series' labels."""
        self.checks: LabelCache[str, Labels] = LabelCache(lambda check: (*lb, ("check", check)))
        self.health: tuple[dict[str, int], tuple[Labels, ...], tuple[float, ...]] | None = None
        """The last health checks seen, and their series' labels and values (sorted by check)."""
        self.xids: LabelCache[int, Labels] = LabelCache(lambda xid: (*lb, ("xid", str(xid))))
        self.links: LabelCache[int, tuple[Labels, ...]] = LabelCache(
            lambda link: tuple((*lb, ("link", str(link)), ("type", kind)) for kind in NVLINK_ERROR_TYPES),
        )
        """Link number -> the labels of its error series, in NVLINK_ERROR_TYPES order."""
        self.migs: LabelCache[MigKey, Labels] = LabelCache(lambda k: without_empty(_mig_labels(lb, *k)))

    def health_series(self, checks: dict[str, int]) -> tuple[tuple[Labels, ...], tuple[float, ...]]:
        """The ``health`` series of ``checks`` (sorted by check): kept while the checks are equal."""
        last = self.health
        if last is not None and (last[0] is checks or last[0] == checks):
            return last[1], last[2]
        ordered = sorted(checks.items())
        labels = tuple(self.checks.get(check) for check, _ in ordered)
        values = tuple(float(level) for _, level in ordered)
        self.health = (checks, labels, values)
        return labels, values


class DeviceLabelSets(Kept):
    """What one renderer keeps of the device series (:mod:`falcon_gpu.schemas.label_cache`): per GPU
    identity (base labels, index, UUID, model) its :class:`DeviceLabels`, shared by every part of the
    schema (pods, policies), and the fabric series' labels."""

    __slots__ = ("_by_identity", "fabric")

    def __init__(self) -> None:
        self._by_identity: LabelCache[tuple[Labels, int, str, str], DeviceLabels] = LabelCache(DeviceLabels)
        self.fabric = fabric.FabricLabels()

    def sweep(self) -> None:
        """Each GPU's own caches (its links, XIDs, MIG devices...), then the GPUs themselves."""
        for labels in self._by_identity.values():
            labels.sweep()
        super().sweep()

    def of(self, base: Labels, dev: DeviceReading) -> DeviceLabels:
        """``base``: the cycle's :attr:`~falcon_gpu.model.cycle.CycleData.base_labels`."""
        return self._by_identity.get((base, dev.index, dev.uuid, dev.name))

    def labels(self, base: Labels, dev: DeviceReading) -> Labels:
        """The GPU's labels (the same tuple every cycle while its identity holds; empty values left out)."""
        return self._by_identity.get((base, dev.index, dev.uuid, dev.name)).device


def mig_key(mig: MigReading) -> MigKey:
    return (mig.gpu_instance_id, mig.compute_instance_id, mig.profile, mig.uuid)


def _mig_labels(base: Labels, gpu_instance: int, compute_instance: int, profile: str, uuid: str) -> Labels:
    return (
        *base,
        ("gpu_instance", str(gpu_instance)),
        ("compute_instance", str(compute_instance)),
        ("mig_profile", profile),
        ("mig_uuid", uuid),
    )


def add_devices(b: FamilyBuilder, cycle: CycleData, kept: DeviceLabelSets, sparse: bool = False) -> None:
    """``kept``: the renderer's label tuples; ``sparse``: the default profile's rendering (module
    docstring)."""
    snap = cycle.snapshot
    base = cycle.base_labels
    driver, cuda = snap.driver_version or "", snap.cuda_version or ""
    info_labels, info_values = b.column(P + "info")
    up_labels, up_values = b.column(P + "up")
    health_labels, health_values = b.column(P + "health")
    want_reasons = b.wants(P + "clock_event_active")
    want_health = b.wants(P + "health") or (sparse and b.wants(P + "health_worst"))
    for dev in snap.devices:
        ls = kept.of(base, dev)
        lb = ls.device
        info_labels.append(ls.info.get((driver, cuda, dev.pci_bus_id)))
        info_values.append(1.0)
        up_labels.append(lb)
        up_values.append(1.0 if dev.up else 0.0)
        health = cycle.health.get(dev.uuid) if want_health else None
        if health is not None:
            labels, values = ls.health_series(health.checks)
            if sparse:
                _nonzero(health_labels, health_values, labels, values)
                b.put(P + "health_worst", lb, max(values, default=0.0))
            else:
                health_labels.extend(labels)
                health_values.extend(values)
        if dev.xid_counts:
            xids = ls.xids.get
            for xid, n in sorted(dev.xid_counts.items()):
                b.put(P + "xid_errors_total", xids(xid), n)
        if dev.up:
            _readings(b, ls, dev, want_reasons, sparse, kept.fabric)


_STRUCTURED = (
    P + "ecc_errors_total", P + "retired_pages", P + "retired_pages_pending", P + "remapped_rows",
    P + "remapped_rows_pending", P + "remapped_rows_failed", P + "clock_event_active",
)  # fmt: skip
"""The structured device series that :func:`_readings` appends to directly, in its order."""


def _nonzero(
    labels_out: list[Labels],
    values_out: list[float],
    labels: Sequence[Labels],
    values: Iterable[float | None],
) -> None:
    """Append the series of ``labels``/``values`` whose value is neither absent nor 0 (sparse)."""
    for labels_of, value in zip(labels, values):  # noqa: B905 (hot path)
        if value:
            labels_out.append(labels_of)
            values_out.append(float(value))


def _readings(
    b: FamilyBuilder,
    ls: DeviceLabels,
    dev: DeviceReading,
    want_reasons: bool,
    sparse: bool,
    fabric_labels: fabric.FabricLabels,
) -> None:
    """``want_reasons``: ``clock_event_active`` is emitted (the ``[metrics]`` table); ``sparse``: the
    default profile's structured series, only those not 0."""
    lb = ls.device
    SCALARS.add_to(b, lb, dev)
    (_sparse_errors if sparse else _dense_errors)(b, ls, dev, want_reasons)
    if dev.gpm is not None:
        _gpm(b, lb, dev.gpm)
    # only links that counted errors: 18 links x 4 types of zeros would double the output
    if dev.nvlink:
        links = ls.links.get
        for link in dev.nvlink:
            for labels, value in zip(links(link.link), _NVLINK_VALUES(link.errors)):  # noqa: B905 (hot)
                b.put(P + "nvlink_errors_total", labels, value)
    if dev.fabric is not None:
        fabric.add_falcon_gpu(b, lb, dev.fabric, fabric_labels, sparse)
    for mig in dev.mig:
        ml = ls.migs.get(mig_key(mig))
        if mig.gpm is not None:
            _gpm(b, ml, mig.gpm)
        used, total = mig.memory_used_bytes, mig.memory_total_bytes
        SCALARS.add_fields(
            b,
            ml,
            memory_used_bytes=used,
            memory_total_bytes=total,
            memory_free_bytes=None if total is None or used is None else total - used,
        )


def _dense_errors(b: FamilyBuilder, ls: DeviceLabels, dev: DeviceReading, want_reasons: bool) -> None:
    """The structured error series, every one (the full profile)."""
    lb = ls.device
    (ecc_l, pages_l, pending_l, rows_l, rpending_l, failed_l, reason_l), (
        ecc_v, pages_v, pending_v, rows_v, rpending_v, failed_v, reason_v
    ) = b.columns_of(_STRUCTURED)  # fmt: skip
    if dev.ecc is not None:
        values = _ECC_VALUES(dev.ecc)
        if None in values:
            for labels, value in zip(ls.ecc, values):  # noqa: B905 (hot path)
                if value is not None:
                    ecc_l.append(labels)
                    ecc_v.append(float(value))
        else:
            ecc_l.extend(ls.ecc)
            ecc_v.extend(map(float, values))
    rp = dev.retired_pages
    if rp is not None:
        pages_l.extend(ls.retired)
        pages_v.extend((float(rp.single_bit), float(rp.double_bit)))
        if rp.pending is not None:
            pending_l.append(lb)
            pending_v.append(float(rp.pending))
    rr = dev.remapped_rows
    if rr is not None:
        rows_l.extend(ls.remapped)
        rows_v.extend((float(rr.correctable), float(rr.uncorrectable)))
        rpending_l.append(lb)
        rpending_v.append(float(rr.pending))
        failed_l.append(lb)
        failed_v.append(float(rr.failed))
    if dev.clock_event_reasons is not None and want_reasons:
        reason_l.extend(ls.reason_labels)
        reason_v.extend(ls.reason_values.get(dev.clock_event_reasons))


def _sparse_errors(b: FamilyBuilder, ls: DeviceLabels, dev: DeviceReading, want_reasons: bool) -> None:
    """The structured error series of the default profile: only those not 0 (``_readings``' dense
    ones, filtered), so a healthy GPU has none of them."""
    lb = ls.device
    (ecc_l, pages_l, pending_l, rows_l, rpending_l, failed_l, reason_l), (
        ecc_v, pages_v, pending_v, rows_v, rpending_v, failed_v, reason_v
    ) = b.columns_of(_STRUCTURED)  # fmt: skip
    if dev.ecc is not None:
        _nonzero(ecc_l, ecc_v, ls.ecc, _ECC_VALUES(dev.ecc))
    rp = dev.retired_pages
    if rp is not None:
        _nonzero(pages_l, pages_v, ls.retired, (rp.single_bit, rp.double_bit))
        _nonzero(pending_l, pending_v, (lb,), (rp.pending,))
    rr = dev.remapped_rows
    if rr is not None:
        _nonzero(rows_l, rows_v, ls.remapped, (rr.correctable, rr.uncorrectable))
        _nonzero(rpending_l, rpending_v, (lb,), (rr.pending,))
        _nonzero(failed_l, failed_v, (lb,), (rr.failed,))
    if dev.clock_event_reasons and want_reasons:
        _nonzero(reason_l, reason_v, ls.reason_labels, ls.reason_values.get(dev.clock_event_reasons))


def _gpm(b: FamilyBuilder, lb: Labels, gpm: GpmReading) -> None:
    """``lb``: labels with no empty value (from :class:`DeviceLabels`)."""
    b.rows(_GPM_BLOCK).append((lb, _GPM_VALUES(gpm)))
