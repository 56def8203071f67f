"""One cycle of hardware readings, as the NVML source saw them.

Every optional reading is ``None`` when the device or driver does not support it
(NVML answered NOT_SUPPORTED) or it failed this cycle; the schemas then simply
emit no series for it. Units are the base units of the Prometheus schema
(bytes, watts, joules, hertz, ratios 0-1) so that no later stage converts twice.
"""

from __future__ import annotations

from dataclasses import field, fields

from falcon_gpu.model.record import record

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


@record
class ProcessReading:
    """A process NVML lists on a device (compute, graphics and MPS lists merged by PID)."""

    pid: int
    name: str | None = None
    types: tuple[str, ...] = ("compute",)
    used_memory_bytes: int | None = None
    sm_util_ratio: float | None = None
    """SM share from process utilisation samples since the previous cycle; None: no sample."""
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@record
class GpmReading:
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


GPM_METRICS: tuple[str, ...] = tuple(f.name for f in fields(GpmReading))
"""The GPM metric names, in :class:`GpmReading` field order."""


@record
class NvlinkErrors:
    """NVLink error counters since the driver loaded: of one link, or summed over a GPU's links."""

    crc_flit: int | None = None
    crc_data: int | None = None
    replay: int | None = None
    recovery: int | None = None


NVLINK_ERROR_TYPES: tuple[str, ...] = tuple(f.name for f in fields(NvlinkErrors))


@record
class NvlinkReading:
    """One NVLink that has counted errors (links without any are not listed: 18 per GPU)."""

    link: int
    errors: NvlinkErrors


@record
class MigReading:
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


@record
class EccCounts:
    corrected_volatile: int | None = None
    uncorrected_volatile: int | None = None
    corrected_aggregate: int | None = None
    uncorrected_aggregate: int | None = None


@record
class RetiredPages:
    single_bit: int
    double_bit: int
    pending: bool | None = None


@record
class RemappedRows:
    correctable: int
    uncorrectable: int
    pending: bool
    failed: bool


@record
class DeviceReading:
    """Everything read from one physical GPU in one cycle.

    ``up`` is False when the device answered GPU_IS_LOST or another per-device
    error; identity fields then come from the last good cycle and readings are None.
    """

    index: int
    uuid: str
    name: str
    pci_bus_id: str
    up: bool = True
    error: str | None = None
    minor_number: int | None = None
    """The ``/dev/nvidia<N>`` minor (GKE's device IDs name it); not always the NVML index."""
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    utilization_ratio: float | None = None
    memory_utilization_ratio: float | None = None
    temperature_celsius: float | None = None
    memory_temperature_celsius: float | None = None
    slowdown_tlimit_celsius: float | None = None
    """T.Limit temperature at which hardware slowdown may begin (NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT)."""
    shutdown_tlimit_celsius: float | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None
    energy_joules: float | None = None
    performance_state: int | None = None
    sm_clock_hertz: float | None = None
    memory_clock_hertz: float | None = None
    fan_speed_ratio: float | None = None
    encoder_utilization_ratio: float | None = None
    decoder_utilization_ratio: float | None = None
    pcie_replays: int | None = None
    ecc: EccCounts | None = None
    retired_pages: RetiredPages | None = None
    remapped_rows: RemappedRows | None = None
    clock_event_reasons: frozenset[str] | None = None
    inforom_valid: bool | None = None
    gpm: GpmReading | None = None
    pcie_tx_bytes: int | None = None
    """PCIe bytes transmitted since the driver loaded (``NVML_FI_DEV_PCIE_COUNT_TX_BYTES``)."""
    pcie_rx_bytes: int | None = None
    pcie_tx_bytes_per_second: float | None = None
    """The counter's rate since the previous cycle; None on the first cycle and after a reset."""
    pcie_rx_bytes_per_second: float | None = None
    nvlink_tx_bytes: int | None = None
    """NVLink data bytes sent since the driver loaded, all links (None: no NVLink)."""
    nvlink_rx_bytes: int | None = None
    nvlink_errors: NvlinkErrors | None = None
    """Error counters summed over the links (None: the GPU reports none)."""
    nvlink: tuple[NvlinkReading, ...] = ()
    """The links with a non-zero error counter, each with its counters."""
    nvlink_tx_bytes_per_second: float | None = None
    """All links' data sent per second since the previous cycle (None: first cycle, reset)."""
    nvlink_rx_bytes_per_second: float | None = None
    mig_enabled: bool = False
    mig: tuple[MigReading, ...] = ()
    processes: tuple[ProcessReading, ...] = ()
    """Processes on the whole GPU (on a MIG GPU: every instance's, with instance ids set)."""
    xid_counts: dict[int, int] = field(default_factory=dict)
    """Cumulative XID events per XID code since the agent started."""
    last_xid: int | None = None
    """The XID of the most recent event since the agent started (arrival order; counts have none)."""


@record
class Snapshot:
    """One cycle of the node: every device, plus whether NVML itself answered."""

    timestamp: float
    """Unix seconds, one value for the whole cycle."""
    nvml_ok: bool
    driver_version: str | None = None
    cuda_version: str | None = None
    devices: tuple[DeviceReading, ...] = ()
    nvml_error: str | None = None
