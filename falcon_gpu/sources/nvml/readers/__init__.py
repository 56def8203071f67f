"""The device readers, one per concern, in the order the source runs them.

To read something new from NVML: add a function ``(ctx) -> dict`` of
``DeviceReading`` fields in a module here and register it below. ``processes``
runs before ``mig`` because MIG instances reuse its SM shares and process list.
"""

from __future__ import annotations

from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields, Reader
from falcon_gpu.sources.nvml.readers.clocks import read_clocks
from falcon_gpu.sources.nvml.readers.health import read_health
from falcon_gpu.sources.nvml.readers.memory import read_memory
from falcon_gpu.sources.nvml.readers.mig import read_mig
from falcon_gpu.sources.nvml.readers.processes import read_processes
from falcon_gpu.sources.nvml.readers.thermal_power import read_thermal_power
from falcon_gpu.sources.nvml.readers.utilization import read_utilization

READERS: tuple[tuple[str, Reader], ...] = (
    ("memory", read_memory),
    ("utilization", read_utilization),
    ("thermal_power", read_thermal_power),
    ("clocks", read_clocks),
    ("health", read_health),
    ("processes", read_processes),
    ("mig", read_mig),
)

__all__ = ["READERS", "DeviceContext", "Fields", "Reader"]
