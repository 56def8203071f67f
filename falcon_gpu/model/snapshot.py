"""One cycle of hardware readings, as the NVML source saw them.

Every optional reading is ``None`` when the device or driver does not support it
(NVML answered NOT_SUPPORTED) or it failed this cycle; the schemas then simply
emit no series for it. Units are the base units of the Prometheus schema
(bytes, watts, joules, hertz, ratios 0-1) so that no later stage converts twice.
"""

from __future__ import annotations

from typing import Final

from falcon_gpu.model.device_reading import DeviceReading as DeviceReading
from falcon_gpu.model.fabric import FabricReading as FabricReading
from falcon_gpu.model.record import Record

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


class ProcessReading(Record):
    """A process NVML lists on a device (compute, graphics and MPS lists merged by PID).

    Its own ``__init__`` (built per process: faster than the generic one)."""

    __slots__ = _fields = (
        "pid", "name", "types", "used_memory_bytes", "sm_util_ratio", "gpu_instance_id", "compute_instance_id"
    )  # fmt: skip

    def __init__(
        self,
        pid: int,
        name: str | None = None,
        types: tuple[str, ...] = ("compute",),
        used_memory_bytes: int | None = None,
        sm_util_ratio: float | None = None,
        gpu_instance_id: int | None = None,
        compute_instance_id: int | None = None,
    ) -> None:
        self.pid: Final = pid
        self.name: Final = name
        self.types: Final = types
        self.used_memory_bytes: Final = used_memory_bytes
        self.sm_util_ratio: Final = sm_util_ratio
        """SM share from process utilisation samples since the previous cycle; None: no sample."""
        self.gpu_instance_id: Final = gpu_instance_id
        self.compute_instance_id: Final = compute_instance_id


class GpmReading(Record):
    """NVML GPM (Hopper and later) metrics between two consecutive cycles' samples, as ratios 0-1.

    A metric the device does not report is None; the reading as a whole is absent (``None`` on
    the device or instance) on the first cycle and where GPM is not supported."""

    __slots__ = _fields = (
        "sm_active",
        "sm_occupancy",
        "tensor_active",
        "dram_active",
        "graphics_active",
        "fp64_active",
        "fp32_active",
        "fp16_active",
    )

    def __init__(
        self,
        sm_active: float | None = None,
        sm_occupancy: float | None = None,
        tensor_active: float | None = None,
        dram_active: float | None = None,
        graphics_active: float | None = None,
        fp64_active: float | None = None,
        fp32_active: float | None = None,
        fp16_active: float | None = None,
    ) -> None:
        self.sm_active: Final = sm_active
        self.sm_occupancy: Final = sm_occupancy
        self.tensor_active: Final = tensor_active
        self.dram_active: Final = dram_active
        self.graphics_active: Final = graphics_active
        self.fp64_active: Final = fp64_active
        self.fp32_active: Final = fp32_active
        self.fp16_active: Final = fp16_active


GPM_METRICS: tuple[str, ...] = GpmReading._fields
"""The GPM metric names, in :class:`GpmReading` field order."""


class NvlinkErrors(Record):
    """NVLink error counters since the driver loaded: of one link, or summed over a GPU's links."""

    __slots__ = _fields = ("crc_flit", "crc_data", "replay", "recovery")

    def __init__(
        self,
        crc_flit: int | None = None,
        crc_data: int | None = None,
        replay: int | None = None,
        recovery: int | None = None,
    ) -> None:
        self.crc_flit: Final = crc_flit
        self.crc_data: Final = crc_data
        self.replay: Final = replay
        self.recovery: Final = recovery


NVLINK_ERROR_TYPES: tuple[str, ...] = NvlinkErrors._fields


class NvlinkReading(Record):
    """One NVLink that has counted errors (links without any are not listed: 18 per GPU)."""

    __slots__ = _fields = ("link", "errors")

    def __init__(
        self,
        link: int,
        errors: NvlinkErrors,
    ) -> None:
        self.link: Final = link
        self.errors: Final = errors


class MigReading(Record):
    """One MIG instance (a populated slot of the parent's MIG device handles)."""

    __slots__ = _fields = (
        "gpu_instance_id",
        "compute_instance_id",
        "profile",
        "uuid",
        "memory_total_bytes",
        "memory_used_bytes",
        "processes",
        "gpm",
        "placement_start",
    )

    def __init__(
        self,
        gpu_instance_id: int,
        compute_instance_id: int,
        profile: str,
        uuid: str,
        memory_total_bytes: int | None = None,
        memory_used_bytes: int | None = None,
        processes: tuple[ProcessReading, ...] = (),
        gpm: GpmReading | None = None,
        placement_start: int | None = None,
    ) -> None:
        self.gpu_instance_id: Final = gpu_instance_id
        self.compute_instance_id: Final = compute_instance_id
        self.profile: Final = profile
        self.uuid: Final = uuid
        self.memory_total_bytes: Final = memory_total_bytes
        self.memory_used_bytes: Final = memory_used_bytes
        self.processes: Final = processes
        self.gpm: Final = gpm
        """The GPU instance's GPM metrics (``nvmlGpmMigSampleGet``; shared by its compute instances)."""
        self.placement_start: Final = placement_start
        """The GPU instance's first slice on its GPU (``nvmlGpuInstanceGetInfo``); tells two instances
        of one profile apart for DRA device names. None: not known (NVML wants a privileged user)."""


class EccCounts(Record):
    __slots__ = _fields = (
        "corrected_volatile",
        "uncorrected_volatile",
        "corrected_aggregate",
        "uncorrected_aggregate",
    )

    def __init__(
        self,
        corrected_volatile: int | None = None,
        uncorrected_volatile: int | None = None,
        corrected_aggregate: int | None = None,
        uncorrected_aggregate: int | None = None,
    ) -> None:
        self.corrected_volatile: Final = corrected_volatile
        self.uncorrected_volatile: Final = uncorrected_volatile
        self.corrected_aggregate: Final = corrected_aggregate
        self.uncorrected_aggregate: Final = uncorrected_aggregate


class RetiredPages(Record):
    __slots__ = _fields = ("single_bit", "double_bit", "pending")

    def __init__(
        self,
        single_bit: int,
        double_bit: int,
        pending: bool | None = None,
    ) -> None:
        self.single_bit: Final = single_bit
        self.double_bit: Final = double_bit
        self.pending: Final = pending


class RemappedRows(Record):
    __slots__ = _fields = ("correctable", "uncorrectable", "pending", "failed")

    def __init__(
        self,
        correctable: int,
        uncorrectable: int,
        pending: bool,
        failed: bool,
    ) -> None:
        self.correctable: Final = correctable
        self.uncorrectable: Final = uncorrectable
        self.pending: Final = pending
        self.failed: Final = failed


class Snapshot(Record):
    """One cycle of the node: every device, plus whether NVML itself answered."""

    timestamp: float
    """Unix seconds, one value for the whole cycle."""
    nvml_ok: bool
    driver_version: str | None = None
    cuda_version: str | None = None
    devices: tuple[DeviceReading, ...] = ()
    nvml_error: str | None = None
