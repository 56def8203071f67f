"""The table-driven reading path: readings declared with ``Nvml(by_table=True)`` need no code.

Such a reading is one field ID with no dedicated function and nothing to compute
(:data:`~falcon_gpu.sources.nvml.field_values.DECLARED`): it rides in the device's one
``nvmlDeviceGetFieldValues`` call, and the reader the table names calls
:func:`read_declared` with its own :class:`Declared` once, which converts each value to its
base unit and type. Per-field answers keep their meaning: NOT_SUPPORTED is remembered and
logged once (the field is not asked again on that GPU), an error counts against that reader.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from falcon_gpu.sources.nvml.field_values import DECLARED, FieldGroup
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields


class Declared:
    """The field-only table readings of one reader: their field group and, in its order, each
    snapshot field with NVML's value -> the base unit and type."""

    __slots__ = ("convert", "group")

    def __init__(self, reader: str) -> None:
        mine = [(spec, r) for spec, r in DECLARED if r.reader == reader]
        self.group = FieldGroup([spec for spec, _ in mine])
        self.convert: tuple[tuple[str, Callable[[Any], Any]], ...] = tuple(
            (r.field, r.from_nvml) for _, r in mine
        )


def read_declared(ctx: DeviceContext, declared: Declared) -> Fields:
    """The values of ``declared`` this cycle (None where absent), in base units."""
    values = ctx.field_values.values(declared.group) if declared.convert else ()
    out = {
        name: None if value is None else from_nvml(value)
        for (name, from_nvml), value in zip(declared.convert, values, strict=True)
    }
    return cast(Fields, out)
