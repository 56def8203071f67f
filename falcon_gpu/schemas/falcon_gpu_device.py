"""Device-level series of the ``falcon_gpu`` Prometheus schema (CONTRACT section 3).

The scalar readings' series come from the reading table (:mod:`falcon_gpu.readings.device`);
what is written here is the structured ones (ECC, pages, rows, clock events, GPM, NVLink errors,
MIG instances) and the order of the families.
"""

from __future__ import annotations

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
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec
from falcon_gpu.schemas.scalars import ScalarSeries

P = "falcon_gpu_"
SCALARS = ScalarSeries(READINGS, "falcon_gpu")
"""The scalar readings (utilisation, memory, temperatures, power, clocks, traffic, ...): from the table,
rendered in one pass per GPU; their families go where SPECS places BOARD and INTERCONNECT."""
_USED, _FREE, _TOTAL = (SCALARS.names[f"memory_{k}_bytes"] for k in ("used", "free", "total"))

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
)
GPM_SERIES: tuple[tuple[str, str], ...] = tuple(zip(GPM_METRICS, (
    P + "sm_active_ratio", P + "sm_occupancy_ratio", P + "tensor_active_ratio", P + "dram_active_ratio",
    P + "graphics_active_ratio", P + "fp64_active_ratio", P + "fp32_active_ratio", P + "fp16_active_ratio",
), strict=True))  # fmt: skip
"""(GpmReading field, series name)."""


def device_labels(base: Labels, dev: DeviceReading) -> Labels:
    """``base``: the cycle's :attr:`~falcon_gpu.model.cycle.CycleData.base_labels`."""
    return (*base, ("gpu", str(dev.index)), ("uuid", dev.uuid), ("model", dev.name))


def mig_labels(base: Labels, mig: MigReading) -> Labels:
    return (
        *base,
        ("gpu_instance", str(mig.gpu_instance_id)),
        ("compute_instance", str(mig.compute_instance_id)),
        ("mig_profile", mig.profile),
        ("mig_uuid", mig.uuid),
    )


def add_devices(b: FamilyBuilder, cycle: CycleData) -> None:
    snap = cycle.snapshot
    base = cycle.base_labels
    for dev in snap.devices:
        lb = device_labels(base, dev)
        b.add(
            P + "info",
            (
                *lb,
                ("driver_version", snap.driver_version or ""),
                ("cuda_version", snap.cuda_version or ""),
                ("pci_bus_id", dev.pci_bus_id),
            ),
            1,
        )
        b.add(P + "up", lb, dev.up)
        health = cycle.health.get(dev.uuid)
        if health is not None:
            for check, level in sorted(health.checks.items()):
                b.add(P + "health", (*lb, ("check", check)), level)
        for xid, n in sorted(dev.xid_counts.items()):
            b.add(P + "xid_errors_total", (*lb, ("xid", str(xid))), n)
        if dev.up:
            _readings(b, lb, dev)


def _readings(b: FamilyBuilder, lb: Labels, dev: DeviceReading) -> None:
    SCALARS.add_to(b, lb, dev)
    if dev.ecc is not None:
        for kind in ("corrected", "uncorrected"):
            for scope in ("volatile", "aggregate"):
                value = getattr(dev.ecc, f"{kind}_{scope}")
                b.add(P + "ecc_errors_total", (*lb, ("type", kind), ("scope", scope)), value)
    if dev.retired_pages is not None:
        b.add(P + "retired_pages", (*lb, ("cause", "single_bit")), dev.retired_pages.single_bit)
        b.add(P + "retired_pages", (*lb, ("cause", "double_bit")), dev.retired_pages.double_bit)
        b.add(P + "retired_pages_pending", lb, dev.retired_pages.pending)
    if dev.remapped_rows is not None:
        rr = dev.remapped_rows
        b.add(P + "remapped_rows", (*lb, ("type", "correctable")), rr.correctable)
        b.add(P + "remapped_rows", (*lb, ("type", "uncorrectable")), rr.uncorrectable)
        b.add(P + "remapped_rows_pending", lb, rr.pending)
        b.add(P + "remapped_rows_failed", lb, rr.failed)
    if dev.clock_event_reasons is not None:
        for reason in CLOCK_EVENT_REASONS:
            b.add(P + "clock_event_active", (*lb, ("reason", reason)), reason in dev.clock_event_reasons)
    _gpm(b, lb, dev.gpm)
    # only links that counted errors: 18 links x 4 types of zeros would double the output
    for link in dev.nvlink:
        ll = (*lb, ("link", str(link.link)))
        for kind in NVLINK_ERROR_TYPES:
            b.add(P + "nvlink_errors_total", (*ll, ("type", kind)), getattr(link.errors, kind))
    for mig in dev.mig:
        ml = mig_labels(lb, mig)
        _gpm(b, ml, mig.gpm)
        b.add(_USED, ml, mig.memory_used_bytes)
        b.add(_TOTAL, ml, mig.memory_total_bytes)
        if mig.memory_total_bytes is not None and mig.memory_used_bytes is not None:
            b.add(_FREE, ml, mig.memory_total_bytes - mig.memory_used_bytes)


def _gpm(b: FamilyBuilder, lb: Labels, gpm: GpmReading | None) -> None:
    if gpm is not None:
        for attr, name in GPM_SERIES:
            b.add(name, lb, getattr(gpm, attr))
