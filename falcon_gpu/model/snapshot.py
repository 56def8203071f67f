"""One cycle of hardware readings, as the NVML source saw them.

Every optional reading is ``None`` when the device or driver does not support it
(NVML answered NOT_SUPPORTED) or it failed this cycle; the schemas then simply
emit no series for it. Units are the base units of the Prometheus schema
(bytes, watts, joules, hertz, ratios 0-1) so that no later stage converts twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from falcon_gpu.model.fabric import FabricReading
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


class DeviceReading(Record):
    """Everything read from one physical GPU in one cycle.

    ``up`` is False when the device answered GPU_IS_LOST or another per-device
    error; identity fields then come from the last good cycle and readings are None.

    Its parameters are in :attr:`_fields` order and may be given by position: the NVML source builds
    one per GPU and cycle from its readers' merged answer with :meth:`of_readings`, which passes every
    value by position (keyword arguments are matched name by name against 48 parameters).
    """

    __slots__ = _fields = (
        "index",
        "uuid",
        "name",
        "pci_bus_id",
        "up",
        "error",
        "minor_number",
        "memory_total_bytes",
        "memory_used_bytes",
        "memory_free_bytes",
        "memory_reserved_bytes",
        "utilization_ratio",
        "memory_utilization_ratio",
        "temperature_celsius",
        "memory_temperature_celsius",
        "slowdown_tlimit_celsius",
        "shutdown_tlimit_celsius",
        "power_watts",
        "power_limit_watts",
        "energy_joules",
        "performance_state",
        "sm_clock_hertz",
        "memory_clock_hertz",
        "fan_speed_ratio",
        "encoder_utilization_ratio",
        "decoder_utilization_ratio",
        "pcie_replays",
        "ecc",
        "retired_pages",
        "remapped_rows",
        "clock_event_reasons",
        "inforom_valid",
        "fabric",
        "gpm",
        "pcie_tx_bytes",
        "pcie_rx_bytes",
        "pcie_tx_bytes_per_second",
        "pcie_rx_bytes_per_second",
        "nvlink_tx_bytes",
        "nvlink_rx_bytes",
        "nvlink_errors",
        "nvlink",
        "nvlink_tx_bytes_per_second",
        "nvlink_rx_bytes_per_second",
        "mig_enabled",
        "mig",
        "processes",
        "xid_counts",
        "last_xid",
    )

    def __init__(
        self,
        index: int,
        uuid: str,
        name: str,
        pci_bus_id: str,
        up: bool = True,
        error: str | None = None,
        minor_number: int | None = None,
        memory_total_bytes: int | None = None,
        memory_used_bytes: int | None = None,
        memory_free_bytes: int | None = None,
        memory_reserved_bytes: int | None = None,
        utilization_ratio: float | None = None,
        memory_utilization_ratio: float | None = None,
        temperature_celsius: float | None = None,
        memory_temperature_celsius: float | None = None,
        slowdown_tlimit_celsius: float | None = None,
        shutdown_tlimit_celsius: float | None = None,
        power_watts: float | None = None,
        power_limit_watts: float | None = None,
        energy_joules: float | None = None,
        performance_state: int | None = None,
        sm_clock_hertz: float | None = None,
        memory_clock_hertz: float | None = None,
        fan_speed_ratio: float | None = None,
        encoder_utilization_ratio: float | None = None,
        decoder_utilization_ratio: float | None = None,
        pcie_replays: int | None = None,
        ecc: EccCounts | None = None,
        retired_pages: RetiredPages | None = None,
        remapped_rows: RemappedRows | None = None,
        clock_event_reasons: frozenset[str] | None = None,
        inforom_valid: bool | None = None,
        fabric: FabricReading | None = None,
        gpm: GpmReading | None = None,
        pcie_tx_bytes: int | None = None,
        pcie_rx_bytes: int | None = None,
        pcie_tx_bytes_per_second: float | None = None,
        pcie_rx_bytes_per_second: float | None = None,
        nvlink_tx_bytes: int | None = None,
        nvlink_rx_bytes: int | None = None,
        nvlink_errors: NvlinkErrors | None = None,
        nvlink: tuple[NvlinkReading, ...] = (),
        nvlink_tx_bytes_per_second: float | None = None,
        nvlink_rx_bytes_per_second: float | None = None,
        mig_enabled: bool = False,
        mig: tuple[MigReading, ...] = (),
        processes: tuple[ProcessReading, ...] = (),
        xid_counts: dict[int, int] | None = None,
        last_xid: int | None = None,
    ) -> None:
        self.index: Final = index
        self.uuid: Final = uuid
        self.name: Final = name
        self.pci_bus_id: Final = pci_bus_id
        self.up: Final = up
        self.error: Final = error
        self.minor_number: Final = minor_number
        """The ``/dev/nvidia<N>`` minor (GKE's device IDs name it); not always the NVML index."""
        self.memory_total_bytes: Final = memory_total_bytes
        self.memory_used_bytes: Final = memory_used_bytes
        self.memory_free_bytes: Final = memory_free_bytes
        self.memory_reserved_bytes: Final = memory_reserved_bytes
        self.utilization_ratio: Final = utilization_ratio
        self.memory_utilization_ratio: Final = memory_utilization_ratio
        self.temperature_celsius: Final = temperature_celsius
        self.memory_temperature_celsius: Final = memory_temperature_celsius
        self.slowdown_tlimit_celsius: Final = slowdown_tlimit_celsius
        """T.Limit temperature at which hardware slowdown may begin
        (NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT)."""
        self.shutdown_tlimit_celsius: Final = shutdown_tlimit_celsius
        self.power_watts: Final = power_watts
        self.power_limit_watts: Final = power_limit_watts
        self.energy_joules: Final = energy_joules
        self.performance_state: Final = performance_state
        self.sm_clock_hertz: Final = sm_clock_hertz
        self.memory_clock_hertz: Final = memory_clock_hertz
        self.fan_speed_ratio: Final = fan_speed_ratio
        self.encoder_utilization_ratio: Final = encoder_utilization_ratio
        self.decoder_utilization_ratio: Final = decoder_utilization_ratio
        self.pcie_replays: Final = pcie_replays
        self.ecc: Final = ecc
        self.retired_pages: Final = retired_pages
        self.remapped_rows: Final = remapped_rows
        self.clock_event_reasons: Final = clock_event_reasons
        self.inforom_valid: Final = inforom_valid
        self.fabric: Final = fabric
        """The NVLink fabric attachment (None: no fabric, before Hopper, or NOT_SUPPORTED)."""
        self.gpm: Final = gpm
        self.pcie_tx_bytes: Final = pcie_tx_bytes
        """PCIe bytes transmitted since the driver loaded (``NVML_FI_DEV_PCIE_COUNT_TX_BYTES``)."""
        self.pcie_rx_bytes: Final = pcie_rx_bytes
        self.pcie_tx_bytes_per_second: Final = pcie_tx_bytes_per_second
        """The counter's rate since the previous cycle; None on the first cycle and after a reset."""
        self.pcie_rx_bytes_per_second: Final = pcie_rx_bytes_per_second
        self.nvlink_tx_bytes: Final = nvlink_tx_bytes
        """NVLink data bytes sent since the driver loaded, all links (None: no NVLink)."""
        self.nvlink_rx_bytes: Final = nvlink_rx_bytes
        self.nvlink_errors: Final = nvlink_errors
        """Error counters summed over the links (None: the GPU reports none)."""
        self.nvlink: Final = nvlink
        """The links with a non-zero error counter, each with its counters."""
        self.nvlink_tx_bytes_per_second: Final = nvlink_tx_bytes_per_second
        """All links' data sent per second since the previous cycle (None: first cycle, reset)."""
        self.nvlink_rx_bytes_per_second: Final = nvlink_rx_bytes_per_second
        self.mig_enabled: Final = mig_enabled
        self.mig: Final = mig
        self.processes: Final = processes
        """Processes on the whole GPU (on a MIG GPU: every instance's, with instance ids set)."""
        self.xid_counts: Final = {} if xid_counts is None else xid_counts
        """Cumulative XID events per XID code since the agent started."""
        self.last_xid: Final = last_xid
        """The XID of the most recent event since the agent started (arrival order; counts have none)."""

    @classmethod
    def of_readings(
        cls,
        index: int,
        uuid: str,
        name: str,
        pci_bus_id: str,
        minor_number: int | None,
        xid_counts: dict[int, int] | None,
        last_xid: int | None,
        readings: Mapping[str, Any],
    ) -> DeviceReading:
        """A device that answered: ``readings`` holds reading fields (those between ``minor_number``
        and ``xid_counts``) by name, a field it lacks takes its default; the same as
        ``DeviceReading(index, uuid, name, pci_bus_id, minor_number=..., xid_counts=..., last_xid=...,
        **readings)`` without matching keywords (``readings`` must hold reading fields only: the
        source checks their names and types first)."""
        values = (
            index, uuid, name, pci_bus_id, True, None, minor_number,
            *map(readings.get, _READINGS, _READING_DEFAULTS), xid_counts, last_xid,
        )  # fmt: skip
        return cls(*values)


def _reading_fields() -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """The reading fields (those after ``minor_number``, before ``xid_counts``) and their defaults, found
    by name in ``__init__``'s signature, which must list the fields in :attr:`_fields` order (a field
    moved in one but not the other would make :meth:`DeviceReading.of_readings` put values in the wrong
    places: refused here, at import)."""
    fields, code = DeviceReading._fields, DeviceReading.__init__.__code__
    params = code.co_varnames[1 : code.co_argcount]
    if params != fields:
        raise TypeError("DeviceReading.__init__ must take its _fields in order")
    defaults = dict(zip(reversed(params), reversed(DeviceReading.__init__.__defaults__ or ()), strict=False))
    readings = fields[fields.index("minor_number") + 1 : fields.index("xid_counts")]
    return readings, tuple(defaults[name] for name in readings)


_READINGS, _READING_DEFAULTS = _reading_fields()
"""The reading fields, in order, and their defaults: what :meth:`DeviceReading.of_readings` takes from its
mapping, and what stands for a field it lacks."""


class Snapshot(msgspec.Struct, frozen=True, gc=False):
    """One cycle of the node: every device, plus whether NVML itself answered."""

    timestamp: float
    """Unix seconds, one value for the whole cycle."""
    nvml_ok: bool
    driver_version: str | None = None
    cuda_version: str | None = None
    devices: tuple[DeviceReading, ...] = ()
    nvml_error: str | None = None
