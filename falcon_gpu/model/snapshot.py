"""One cycle of hardware readings, as the NVML source saw them.

Every optional reading is ``None`` when the device or driver does not support it
(NVML answered NOT_SUPPORTED) or it failed this cycle; the schemas then simply
emit no series for it. Units are the base units of the Prometheus schema
(bytes, watts, joules, hertz, ratios 0-1) so that no later stage converts twice.
"""

from __future__ import annotations

import msgspec

from falcon_gpu.model.device_reading import DeviceReading as DeviceReading
from falcon_gpu.model.fabric import FabricReading as FabricReading

CLOCK_EVENT_REASONS: tuple[str, ...] = (
    "idle",
    "applications_clocks",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal",
    "hw_thermal",
    "hw_power_brake",
    "display_clocks",
)
"""Clock event (throttle) reason names, in NVML bit order (bit 0 = idle)."""


class ProcessReading(msgspec.Struct, frozen=True, gc=False):
    """A process NVML lists on a device (compute, graphics and MPS lists merged by PID)."""

    pid: int
    name: str | None = None
    types: tuple[str, ...] = ("compute",)
    used_memory_bytes: int | None = None
    sm_util_ratio: float | None = None
    """SM share from process utilisation samples since the previous cycle; None: no sample."""
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


class GpmReading(msgspec.Struct, frozen=True, gc=False):
    """NVML GPM (Hopper and later) metrics between two consecutive cycles' samples, as ratios 0-1.

    A metric the device does not report is None; the reading as a whole is absent (``None`` on
    the device or instance) on the first cycle and where GPM is not supported."""

    sm_active: float | None = None
    sm_occupancy: float | None = None
    tensor_active: float | None = None
    dram_active: float | None = None
    graphics_active: float | None = None
    fp64_active: float | None = None
    fp32_active: float | None = None
    fp16_active: float | None = None


GPM_METRICS: tuple[str, ...] = GpmReading.__struct_fields__
"""The GPM metric names, in :class:`GpmReading` field order."""


class NvlinkErrors(msgspec.Struct, frozen=True, gc=False):
    """NVLink error counters since the driver loaded: of one link, or summed over a GPU's links."""

    crc_flit: int | None = None
    crc_data: int | None = None
    replay: int | None = None
    recovery: int | None = None


NVLINK_ERROR_TYPES: tuple[str, ...] = NvlinkErrors.__struct_fields__


class NvlinkReading(msgspec.Struct, frozen=True, gc=False):
    """One NVLink that has counted errors (links without any are not listed: 18 per GPU)."""

    link: int
    errors: NvlinkErrors


class MigReading(msgspec.Struct, frozen=True, gc=False):
    """One MIG instance (a populated slot of the parent's MIG device handles)."""

    gpu_instance_id: int
    compute_instance_id: int
    profile: str
    uuid: str
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    processes: tuple[ProcessReading, ...] = ()
    gpm: GpmReading | None = None
    """The GPU instance's GPM metrics (``nvmlGpmMigSampleGet``; shared by its compute instances)."""
    placement_start: int | None = None
    """The GPU instance's first slice on its GPU (``nvmlGpuInstanceGetInfo``); tells two instances
    of one profile apart for DRA device names. None: not known (NVML wants a privileged user)."""


class EccCounts(msgspec.Struct, frozen=True, gc=False):
    corrected_volatile: int | None = None
    uncorrected_volatile: int | None = None
    corrected_aggregate: int | None = None
    uncorrected_aggregate: int | None = None


class RetiredPages(msgspec.Struct, frozen=True, gc=False):
    single_bit: int
    double_bit: int
    pending: bool | None = None


class RemappedRows(msgspec.Struct, frozen=True, gc=False):
    correctable: int
    uncorrectable: int
    pending: bool
    failed: bool


class Snapshot(msgspec.Struct, frozen=True, gc=False):
    """One cycle of the node: every device, plus whether NVML itself answered."""

    timestamp: float
    """Unix seconds, one value for the whole cycle."""
    nvml_ok: bool
    driver_version: str | None = None
    cuda_version: str | None = None
    devices: tuple[DeviceReading, ...] = ()
    nvml_error: str | None = None
