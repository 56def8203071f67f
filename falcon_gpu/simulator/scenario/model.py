"""The typed scenario that :mod:`falcon_gpu.simulator.scenario.parse` parses and the simulator serves.

Frozen ``msgspec.Struct`` values (nothing compiled at import, unlike a dataclass or a
NamedTuple: the plugin's start-up pays for every class on its import path), with no
behaviour beyond :func:`at` (a per-cycle list, the last value repeating), the ``present`` checks and
:meth:`GpuScenario.supports`; kept apart from the parser so that the simulator depends on the data,
not on JSON handling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:  # parse imports it only for a scenario with a host (else the plugin start pays for it)
    from falcon_gpu.simulator.scenario.host_model import HostScenario

Series = tuple[float, ...]
"""One value per cycle from cycle 0; the last value repeats."""

PROCESS_TYPES = ("compute", "graphics", "mps")


def at(series: Series, cycle: int) -> float:
    """The value of ``series`` at ``cycle`` (the last one once the list runs out)."""
    return series[min(max(cycle, 0), len(series) - 1)]


class ProcessScenario(msgspec.Struct, frozen=True, gc=False):
    pid: int
    name: str | None
    types: tuple[str, ...]
    used_memory_bytes: Series | None
    sm_util_percent: Series | None
    from_cycle: int = 0
    until_cycle: int | None = None

    def present(self, cycle: int) -> bool:
        """Running in ``cycle``: from ``from_cycle`` up to, not including, ``until_cycle``."""
        return self.from_cycle <= cycle and (self.until_cycle is None or cycle < self.until_cycle)


GPM_KEYS = (
    "sm_active_percent", "sm_occupancy_percent", "tensor_active_percent", "dram_active_percent",
    "graphics_active_percent", "fp64_active_percent", "fp32_active_percent", "fp16_active_percent",
)  # fmt: skip
"""The scenario's ``gpm`` keys, in :class:`~falcon_gpu.model.snapshot.GpmReading` field order."""

Gpm = dict[str, Series]
"""The ``gpm`` keys present (each a percent, averaged over a cycle)."""


class NvlinkScenario(msgspec.Struct, frozen=True, gc=False):
    """One NVLink: data counters in bytes (served in KiB, as NVML does) and error counters."""

    link: int
    tx_bytes: Series | None
    rx_bytes: Series | None
    crc_flit_errors: Series | None
    crc_data_errors: Series | None
    replay_errors: Series | None
    recovery_errors: Series | None
    active: Series | None = None
    """1 (the link is up, the default) or 0 per cycle: what ``nvmlDeviceGetNvLinkState`` answers."""


class MigScenario(msgspec.Struct, frozen=True, gc=False):
    gpu_instance_id: int
    compute_instance_id: int
    profile: str
    uuid: str
    memory_total_bytes: Series | None
    memory_used_bytes: Series | None
    processes: tuple[ProcessScenario, ...]
    gpm: Gpm | None = None
    """The GPU instance's GPM activity (a device without ``gpm`` serves no instance GPM either)."""
    placement_start: int | None = None
    """The GPU instance's placement start (``nvmlGpuInstanceGetInfo``); None: NOT_SUPPORTED."""
    from_cycle: int = 0
    until_cycle: int | None = None
    """Created in ``from_cycle``, destroyed in ``until_cycle`` (an administrator's reconfiguration)."""

    def present(self, cycle: int) -> bool:
        """Exists in ``cycle``: from ``from_cycle`` up to, not including, ``until_cycle``."""
        return self.from_cycle <= cycle and (self.until_cycle is None or cycle < self.until_cycle)


class EccScenario(msgspec.Struct, frozen=True, gc=False):
    corrected_volatile: Series | None
    uncorrected_volatile: Series | None
    corrected_aggregate: Series | None
    uncorrected_aggregate: Series | None


class RetiredPagesScenario(msgspec.Struct, frozen=True, gc=False):
    single_bit: Series
    double_bit: Series
    pending: bool


class RemappedRowsScenario(msgspec.Struct, frozen=True, gc=False):
    correctable: Series
    uncorrectable: Series
    pending: bool
    failed: bool


class FabricScenario(msgspec.Struct, frozen=True, gc=False):
    """A GPU's NVLink fabric attachment (``nvmlDeviceGetGpuFabricInfoV``), in NVML's encoding."""

    state: Series
    """Per cycle, ``NVML_GPU_FABRIC_STATE_*`` (3: completed)."""
    status: int
    clique_id: int
    cluster_uuid: bytes
    """16 bytes."""
    health_mask: int


class XidEvent(msgspec.Struct, frozen=True, gc=False):
    cycle: int
    xid: int


class GpuScenario(msgspec.Struct, frozen=True, gc=False):
    uuid: str
    name: str
    pci_bus_id: str
    values: dict[str, Series]
    """The plain numeric keys (``memory_used_bytes``, ``power_watts``, ...) that are present."""
    ecc: EccScenario | None
    retired_pages: RetiredPagesScenario | None
    remapped_rows: RemappedRowsScenario | None
    clock_event_reasons: tuple[str, ...] | None
    inforom_valid: bool
    not_supported: frozenset[str]
    lost_at_cycle: int | None
    xid_events: tuple[XidEvent, ...]
    processes: tuple[ProcessScenario, ...]
    mig: tuple[MigScenario, ...]
    gpm: Gpm | None = None
    """None: a pre-Hopper device (``nvmlGpmQueryDeviceSupport`` says unsupported)."""
    pcie: dict[str, Series] | None = None
    """``tx_bytes`` / ``rx_bytes`` counters."""
    nvlink: tuple[NvlinkScenario, ...] = ()
    mig_mode: Series | None = None
    """Per cycle 1 (MIG on) or 0 (off); None: on when the GPU lists ``mig`` instances. While it is
    off no instance exists, whatever their cycles say."""
    fabric: FabricScenario | None = None
    """None: no fabric (before Hopper, a PCIe board): NOT_SUPPORTED."""

    def supports(self, name: str) -> bool:
        return name not in self.not_supported


class Scenario(msgspec.Struct, frozen=True, gc=False):
    driver_version: str
    cuda_version: str
    gpus: tuple[GpuScenario, ...]
    host: HostScenario | None = None


def settled_cycle(gpu: GpuScenario) -> int:
    """The first cycle from which every answer about ``gpu`` repeats: each of its per-cycle lists
    has reached its last value and each cycle number in it (a process's or MIG instance's start and
    end, the lost cycle, an XID's cycle) has passed. From then on the simulator answers this GPU from
    what it worked out once (see :class:`~falcon_gpu.simulator.nvml.core.SimCore`); only the cycles'
    timestamps move. Found by walking the whole scenario, so a key added to it later counts too: a
    :data:`Series` (a tuple of numbers) by its length, a field whose name ends in ``cycle`` by its value."""
    last = 0
    stack: list[object] = [gpu]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += item.values()
        elif isinstance(item, msgspec.Struct):  # a scenario value
            for name, value in zip(item.__struct_fields__, msgspec.structs.astuple(item), strict=True):
                if name.endswith("cycle") and isinstance(value, int):
                    last = max(last, value)
                else:
                    stack.append(value)
        elif isinstance(item, tuple):
            if item and all(isinstance(v, int | float) for v in item):
                last = max(last, len(item) - 1)
            else:
                stack += item
    return last
