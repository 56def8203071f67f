"""``DeviceReading``: everything read from one physical GPU in one cycle, its scalar readings from the table.

The class is built here, at import, with ``msgspec.defstruct`` (a ``msgspec.Struct``: defined and
constructed in C, frozen, not tracked by the garbage collector) from :data:`DEVICE_FIELDS`: the
identity fields, then one field per row of the reading table
(:data:`~falcon_gpu.readings.device.READINGS`: ``type | None``, default None), then the structured
readings and the XID counts written below. A reading added to the table is a field here with no edit.

mypy reads ``device_reading.pyi`` instead of this module: the same class written out, generated from
:data:`DEVICE_FIELDS` by ``python scripts/gen_device_reading_stub.py`` (:func:`stub`), and checked for
staleness by ``tests/model/test_device_reading.py``. :data:`ReadingFields` (the scalar keys a reader
may answer, by type) is generated the same way.

``up`` is False when the device answered GPU_IS_LOST or another per-device error; identity fields then
come from the last good cycle and readings are None.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, TypedDict

import msgspec

from falcon_gpu.readings.device import READINGS

_REQUIRED: Final = msgspec.NODEFAULT

IDENTITY: Final[tuple[tuple[str, str, Any], ...]] = (
    ("index", "int", _REQUIRED),
    ("uuid", "str", _REQUIRED),
    ("name", "str", _REQUIRED),
    ("pci_bus_id", "str", _REQUIRED),
    ("up", "bool", True),
    ("error", "str | None", None),
    ("minor_number", "int | None", None),
)
"""(name, annotation, default) of the device's identity (the source's, not a reader's)."""
STRUCTURED: Final[tuple[tuple[str, str, Any], ...]] = (
    ("ecc", "EccCounts | None", None),
    ("retired_pages", "RetiredPages | None", None),
    ("remapped_rows", "RemappedRows | None", None),
    ("clock_event_reasons", "frozenset[str] | None", None),
    ("inforom_valid", "bool | None", None),
    ("fabric", "FabricReading | None", None),
    ("gpm", "GpmReading | None", None),
    ("nvlink_errors", "NvlinkErrors | None", None),  # summed over the links (None: the GPU reports none)
    ("nvlink", "tuple[NvlinkReading, ...]", ()),  # the links with a non-zero error counter
    ("mig_enabled", "bool", False),
    ("mig", "tuple[MigReading, ...]", ()),
    ("processes", "tuple[ProcessReading, ...]", ()),  # on a MIG GPU: every instance's, instance ids set
)
"""The structured readings (what :class:`~falcon_gpu.sources.nvml.readers.base.Fields` lists by hand)."""
EVENTS: Final[tuple[tuple[str, str, Any], ...]] = (
    ("xid_counts", "dict[int, int]", {}),  # cumulative XID events per code since the agent started
    ("last_xid", "int | None", None),  # the most recent event's XID (arrival order)
)
TABLE: Final = tuple((r.field, f"{r.type.__name__} | None", None) for r in READINGS)
"""One field per row of the reading table."""
DEVICE_FIELDS: Final = (*IDENTITY, *TABLE, *STRUCTURED, *EVENTS)
"""Every field of :class:`DeviceReading`, in order."""
READING_FIELDS: Final = tuple(name for name, _, _ in (*TABLE, *STRUCTURED))
"""What readers answer (what :meth:`DeviceReading.of_readings` takes from its mapping), in order."""
_DEFAULTS: Final = tuple(default for _, _, default in (*TABLE, *STRUCTURED))


def _of_readings(
    cls: Any,
    index: int,
    uuid: str,
    name: str,
    pci_bus_id: str,
    minor_number: int | None,
    xid_counts: dict[int, int] | None,
    last_xid: int | None,
    readings: Mapping[str, Any],
) -> Any:
    """A device that answered: ``readings`` holds reading fields by name (the source checks their names
    and types first), a field it lacks takes its default; every value passed by position."""
    values = map(readings.get, READING_FIELDS, _DEFAULTS)
    events = {} if xid_counts is None else xid_counts
    return cls(index, uuid, name, pci_bus_id, True, None, minor_number, *values, events, last_xid)


DeviceReading = msgspec.defstruct(
    "DeviceReading",
    [(name, annotation, default) for name, annotation, default in DEVICE_FIELDS],
    module="falcon_gpu.model.snapshot",  # where it is imported from (pickle, repr), and its types resolve
    frozen=True,
    gc=False,
    namespace={
        "__doc__": "Everything read from one physical GPU in one cycle (see the module docstring).",
        "of_readings": classmethod(_of_readings),
    },
)
ReadingFields = TypedDict(  # type: ignore[misc]  # built from the table; mypy reads the .pyi
    "ReadingFields", {r.field: r.type | None for r in READINGS}, total=False
)


_IMPORTS: Final = """from collections.abc import Mapping
from typing import Any, TypedDict

import msgspec

from falcon_gpu.model.fabric import FabricReading
from falcon_gpu.model.snapshot import (
    EccCounts,
    GpmReading,
    MigReading,
    NvlinkErrors,
    NvlinkReading,
    ProcessReading,
    RemappedRows,
    RetiredPages,
)
"""


_OF_READINGS: Final = (
    "cls", "index: int", "uuid: str", "name: str", "pci_bus_id: str", "minor_number: int | None",
    "xid_counts: dict[int, int] | None", "last_xid: int | None", "readings: Mapping[str, Any]",
)  # fmt: skip


def stub() -> str:
    """The text of ``device_reading.pyi``: :class:`DeviceReading` and :data:`ReadingFields` written out."""
    lines = [
        "# Generated from the reading table by `python scripts/gen_device_reading_stub.py`: do not edit",
        "# (tests/model/test_device_reading.py fails where it is stale).",
        _IMPORTS,
        "class DeviceReading(msgspec.Struct, frozen=True, gc=False):",
        *(f"    {n}: {a}" + ("" if d is _REQUIRED else " = ...") for n, a, d in DEVICE_FIELDS),
        "    @classmethod",
        "    def of_readings(",
        *(f"        {p}," for p in _OF_READINGS),
        "    ) -> DeviceReading: ...",
        "",
        "class ReadingFields(TypedDict, total=False):",
        *(f"    {n}: {a}" for n, a, _ in TABLE),
        "",
    ]
    return "\n".join(lines)
