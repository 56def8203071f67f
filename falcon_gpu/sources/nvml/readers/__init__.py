"""The device readers, one per concern, in the order the source runs them.

To read something new from NVML: add the field to ``DeviceReading`` and to
:class:`~falcon_gpu.sources.nvml.readers.base.Fields`, a function ``(ctx) -> Fields``
in a module here (a scalar NVML also has a field ID for goes in
:data:`~falcon_gpu.sources.nvml.field_values.FIELDS` and is read with
``ctx.field_values``), and register it below; its name becomes the ``reader``
label of ``falcon_gpu_agent_reader_success`` / ``_reader_seconds``. ``processes``
runs before ``mig`` because MIG instances reuse its SM shares and process list, and
``gpm`` after ``mig`` because it samples each instance and gives its processes their SM share.
"""

from __future__ import annotations

from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields, Reader, check_fields
from falcon_gpu.sources.nvml.readers.clocks import read_clocks
from falcon_gpu.sources.nvml.readers.fabric import read_fabric
from falcon_gpu.sources.nvml.readers.gpm import read_gpm
from falcon_gpu.sources.nvml.readers.health import read_health
from falcon_gpu.sources.nvml.readers.interconnect import read_interconnect
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
    ("fabric", read_fabric),
    ("processes", read_processes),
    ("mig", read_mig),
    ("gpm", read_gpm),
    ("interconnect", read_interconnect),
)

__all__ = ["READERS", "DeviceContext", "Fields", "Reader", "check_fields"]
