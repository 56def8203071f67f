"""The device readers, one per concern, in the order the source runs them.

A scalar reading is a row of the reading table (:mod:`falcon_gpu.readings.device`), read by the generic
table reader (:mod:`~falcon_gpu.sources.nvml.readers.table`) of the reader the row names, unless the row
is a ``hook``: then that reader's own code reads it. A new concern is a module here, a function
``(ctx) -> Fields`` registered in :data:`READERS` (its name becomes the ``reader`` label of
``falcon_gpu_agent_reader_success`` / ``_reader_seconds``) and, for the structured readings it answers,
its line in :data:`STRUCTURED_BY`. A reader that reads what an earlier one left in ``ctx.fields`` says
so (its module's ``NEEDS``, in :data:`NEEDS`): :func:`check_order` refuses, at import, an order in
which a reading is needed before the reader that reads it runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from falcon_gpu.readings.device import READINGS
from falcon_gpu.sources.nvml.readers import clocks, gpm, mig, processes, thermal_power, utilization
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields, Reader, check_fields
from falcon_gpu.sources.nvml.readers.fabric import read_fabric
from falcon_gpu.sources.nvml.readers.health import read_health
from falcon_gpu.sources.nvml.readers.interconnect import read_interconnect
from falcon_gpu.sources.nvml.readers.memory import read_memory

READERS: tuple[tuple[str, Reader], ...] = (
    ("memory", read_memory),
    ("utilization", utilization.read_utilization),
    ("thermal_power", thermal_power.read_thermal_power),
    ("clocks", clocks.read_clocks),
    ("health", read_health),
    ("fabric", read_fabric),
    ("processes", processes.read_processes),
    ("mig", mig.read_mig),
    ("gpm", gpm.read_gpm),
    ("interconnect", read_interconnect),
)

NEEDS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType({
    "utilization": utilization.TABLE.needs,
    "thermal_power": thermal_power.TABLE.needs,
    "clocks": clocks.NEEDS,
    "processes": processes.NEEDS,
    "mig": mig.NEEDS,
    "gpm": gpm.NEEDS,
})  # fmt: skip
"""Per reader: the readings it takes from earlier readers this cycle (``ctx.fields``)."""

STRUCTURED_BY: Final[Mapping[str, str]] = MappingProxyType({
    "ecc": "health", "retired_pages": "health", "remapped_rows": "health", "inforom_valid": "health",
    "clock_event_reasons": "clocks", "fabric": "fabric", "processes": "processes", "mig_enabled": "mig",
    "mig": "mig", "gpm": "gpm", "nvlink_errors": "interconnect", "nvlink": "interconnect",
})  # fmt: skip
"""The reader that first answers each structured reading (the table names the scalar ones')."""


def check_order(readers: tuple[tuple[str, Reader], ...], needs: Mapping[str, tuple[str, ...]]) -> None:
    """Raise ValueError where a reader needs a reading that no earlier reader answers."""
    produced_by = {r.field: r.reader for r in READINGS} | dict(STRUCTURED_BY)
    seen: set[str] = set()
    for name, _ in readers:
        for field in needs.get(name, ()):
            if produced_by.get(field) not in seen:
                raise ValueError(
                    f"reader {name} needs {field}, which {produced_by.get(field)} reads after it"
                )
        seen.add(name)


check_order(READERS, NEEDS)

__all__ = ["NEEDS", "READERS", "DeviceContext", "Fields", "Reader", "check_fields", "check_order"]
