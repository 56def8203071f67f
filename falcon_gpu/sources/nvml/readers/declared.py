"""The table-driven reading path: readings declared with ``Nvml(by_table=True)`` need no code.

Such a reading is one field ID with no dedicated function and nothing to compute
(:data:`~falcon_gpu.sources.nvml.field_values.DECLARED`): it rides in the device's one
``nvmlDeviceGetFieldValues`` call, and the reader the table names calls
:func:`read_declared` with its own name once, which converts each to its base unit and
type (or, as ``thermal_power`` does, takes their specs last into the field group it reads in
one look-up, and converts each with its ``from_nvml``). Per-field answers
keep their meaning: NOT_SUPPORTED is remembered and logged once (the field is not asked again
on that GPU), an error counts against that reader.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from falcon_gpu.sources.nvml.calls import ABSENT
from falcon_gpu.sources.nvml.field_values import DECLARED, FieldSpec
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields

Declared = tuple[tuple[FieldSpec, str, Callable[[Any], Any]], ...]
"""(field spec, snapshot field, NVML's value -> the base unit and type) per reading."""


def declared_for(reader: str) -> Declared:
    """The field-only table readings that ``reader`` produces (built once, at the reader's import)."""
    return tuple((spec, r.field, r.from_nvml) for spec, r in DECLARED if r.reader == reader)


def read_declared(ctx: DeviceContext, declared: Declared) -> Fields:
    """The values of ``declared`` this cycle (None where absent), in base units."""
    out: dict[str, Any] = {}
    batch, nvml = ctx.field_values, ctx.nvml
    for spec, name, from_nvml in declared:
        value = batch.value(nvml, spec)
        out[name] = None if value is ABSENT else from_nvml(value)
    return cast(Fields, out)
