"""Device-level series of the ``falcon_gpu`` Prometheus schema (CONTRACT section 3)."""

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
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec

P = "falcon_gpu_"

SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(P + "info", "gauge", "GPU identity; value is always 1."),
    MetricSpec(P + "up", "gauge", "1 when the GPU answered this cycle, 0 when lost or failing."),
    MetricSpec(P + "utilization_ratio", "gauge", "Fraction of the sample period a kernel was running."),
    MetricSpec(P + "memory_utilization_ratio", "gauge", "Fraction of time the memory controller was busy."),
    MetricSpec(P + "memory_used_bytes", "gauge", "Framebuffer memory used."),
    MetricSpec(P + "memory_free_bytes", "gauge", "Framebuffer memory free."),
    MetricSpec(P + "memory_total_bytes", "gauge", "Framebuffer memory installed."),
    MetricSpec(P + "memory_reserved_bytes", "gauge", "Framebuffer memory reserved by the driver."),
    MetricSpec(P + "temperature_celsius", "gauge", "GPU core temperature."),
    MetricSpec(P + "memory_temperature_celsius", "gauge", "HBM/memory temperature."),
    MetricSpec(P + "power_watts", "gauge", "Power draw."),
    MetricSpec(P + "power_limit_watts", "gauge", "Enforced power limit."),
    MetricSpec(P + "energy_joules_total", "counter", "Energy consumed since the driver loaded."),
    MetricSpec(P + "performance_state", "gauge", "Performance state, 0 (max) to 15 (min)."),
    MetricSpec(P + "sm_clock_hertz", "gauge", "SM clock."),
    MetricSpec(P + "memory_clock_hertz", "gauge", "Memory clock."),
    MetricSpec(P + "fan_speed_ratio", "gauge", "Fan speed as a fraction of its maximum."),
    MetricSpec(P + "encoder_utilization_ratio", "gauge", "Video encoder utilisation."),
    MetricSpec(P + "decoder_utilization_ratio", "gauge", "Video decoder utilisation."),
    MetricSpec(P + "pcie_replays_total", "counter", "PCIe replay counter."),
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
    MetricSpec(P + "pcie_transmit_bytes_total", "counter", "PCIe bytes sent since the driver loaded."),
    MetricSpec(P + "pcie_receive_bytes_total", "counter", "PCIe bytes received since the driver loaded."),
    MetricSpec(P + "nvlink_transmit_bytes_total", "counter", "NVLink data bytes sent, all links."),
    MetricSpec(P + "nvlink_receive_bytes_total", "counter", "NVLink data bytes received, all links."),
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
    b.add(P + "utilization_ratio", lb, dev.utilization_ratio)
    b.add(P + "memory_utilization_ratio", lb, dev.memory_utilization_ratio)
    b.add(P + "memory_used_bytes", lb, dev.memory_used_bytes)
    b.add(P + "memory_free_bytes", lb, dev.memory_free_bytes)
    b.add(P + "memory_total_bytes", lb, dev.memory_total_bytes)
    b.add(P + "memory_reserved_bytes", lb, dev.memory_reserved_bytes)
    b.add(P + "temperature_celsius", lb, dev.temperature_celsius)
    b.add(P + "memory_temperature_celsius", lb, dev.memory_temperature_celsius)
    b.add(P + "power_watts", lb, dev.power_watts)
    b.add(P + "power_limit_watts", lb, dev.power_limit_watts)
    b.add(P + "energy_joules_total", lb, dev.energy_joules)
    b.add(P + "performance_state", lb, dev.performance_state)
    b.add(P + "sm_clock_hertz", lb, dev.sm_clock_hertz)
    b.add(P + "memory_clock_hertz", lb, dev.memory_clock_hertz)
    b.add(P + "fan_speed_ratio", lb, dev.fan_speed_ratio)
    b.add(P + "encoder_utilization_ratio", lb, dev.encoder_utilization_ratio)
    b.add(P + "decoder_utilization_ratio", lb, dev.decoder_utilization_ratio)
    b.add(P + "pcie_replays_total", lb, dev.pcie_replays)
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
    b.add(P + "pcie_transmit_bytes_total", lb, dev.pcie_tx_bytes)
    b.add(P + "pcie_receive_bytes_total", lb, dev.pcie_rx_bytes)
    b.add(P + "nvlink_transmit_bytes_total", lb, dev.nvlink_tx_bytes)
    b.add(P + "nvlink_receive_bytes_total", lb, dev.nvlink_rx_bytes)
    for (
        link
    ) in dev.nvlink:  # only links that counted errors: 18 links x 4 types of zeros would double the output
        ll = (*lb, ("link", str(link.link)))
        for kind in NVLINK_ERROR_TYPES:
            b.add(P + "nvlink_errors_total", (*ll, ("type", kind)), getattr(link.errors, kind))
    for mig in dev.mig:
        ml = mig_labels(lb, mig)
        _gpm(b, ml, mig.gpm)
        b.add(P + "memory_used_bytes", ml, mig.memory_used_bytes)
        b.add(P + "memory_total_bytes", ml, mig.memory_total_bytes)
        if mig.memory_total_bytes is not None and mig.memory_used_bytes is not None:
            b.add(P + "memory_free_bytes", ml, mig.memory_total_bytes - mig.memory_used_bytes)


def _gpm(b: FamilyBuilder, lb: Labels, gpm: GpmReading | None) -> None:
    if gpm is not None:
        for attr, name in GPM_SERIES:
            b.add(name, lb, getattr(gpm, attr))
