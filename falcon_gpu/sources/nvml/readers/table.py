"""The generic table reader: every row of the reading table its reader has no code for.

A row of :data:`~falcon_gpu.readings.device.READINGS` whose ``Nvml`` is not a ``hook`` is read here,
from the row alone: a field ID rides in the device's one ``nvmlDeviceGetFieldValues`` call (its
dedicated function, where the row names one, for a driver without the field); otherwise the row's
``call`` with its ``args`` is made as its ``refresh`` says (every cycle; an administrator's setting,
once a minute; following another reading, asked again when that one changed), once for all the rows
of the reader that share it, and its ``member`` taken. Each value is converted to the base unit and
type by the row's ``from_nvml``. Per-field answers keep their meaning: NOT_SUPPORTED is remembered and
logged once (not asked again on that GPU), an error counts against the reader.

A reader calls :func:`read_table` once with its :class:`TableRows` (built at import) and adds what its
hooks compute: the power fallback, the P-state 32 that means unknown, the memory struct's versions.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from operator import attrgetter, itemgetter
from typing import Any

from falcon_gpu.readings.device import BY_FIELD, READINGS
from falcon_gpu.readings.spec import Reading
from falcon_gpu.readings.units import divisor, multiplier
from falcon_gpu.sources.nvml.calls import ABSENT
from falcon_gpu.sources.nvml.field_values import TABLE_FIELDS, FieldGroup
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields


def table_call(field: str) -> str:
    """The function the reading table names for ``field``: a hook calls it by this name, so that no
    call is written twice (the table and a reader)."""
    nvml = BY_FIELD[field].nvml
    if nvml is None or nvml.call is None:
        raise ValueError(f"{field} has no NVML function in the reading table")
    return nvml.call


def _fast(row: Reading) -> Callable[[Any], Any]:
    """``row.from_nvml`` as one C-level call where it is one: the type itself (no unit change), or a
    float reading divided or multiplied by an exact constant (the same float, see
    :func:`~falcon_gpu.readings.units.divisor`)."""
    nvml = row.nvml
    assert nvml is not None
    if nvml.unit == row.unit:
        return row.type
    if row.type is float:
        with suppress(ValueError):
            return divisor(nvml.unit, row.unit).__rtruediv__
        with suppress(ValueError):
            return multiplier(nvml.unit, row.unit).__rmul__
    return row.from_nvml


class _Call:
    """One call of the table (its function and arguments) and the rows it answers: each row's field, its
    member of the answer and its conversion. Its not-supported and refresh key is the first row's field;
    its refresh the first row's (rows that share a call share its refresh: checked at import)."""

    __slots__ = ("after", "args", "fn", "key", "kind", "rows")

    def __init__(self, row: Reading) -> None:
        nvml = row.nvml
        assert nvml is not None and nvml.call is not None
        self.key = row.field
        self.fn = nvml.call
        self.args = nvml.args
        self.kind = nvml.refresh.kind
        self.after = nvml.refresh.after or ""
        self.rows: tuple[tuple[str, Callable[[Any], Any] | None, Callable[[Any], Any]], ...] = ()
        """Per row: its field, how its member is taken from the answer (None: the answer itself), its
        conversion."""

    def add(self, row: Reading) -> None:
        nvml = row.nvml
        assert nvml is not None
        if (nvml.refresh.kind, nvml.refresh.after or "") != (self.kind, self.after):
            raise ValueError(f"{row.field}: refreshed unlike {self.key}, which shares its call")
        member = nvml.member
        take = (
            None if member is None else itemgetter(member) if isinstance(member, int) else attrgetter(member)
        )
        self.rows = (*self.rows, (row.field, take, _fast(row)))


class TableRows:
    """The rows of the reading table that ``reader`` reads with no code of its own (built at import)."""

    __slots__ = ("calls", "convert", "every", "group", "needs", "slow")

    def __init__(self, reader: str) -> None:
        rows = [r for r in READINGS if r.reader == reader and r.nvml is not None and not r.nvml.hook]
        by_field = [r for r in rows if r.nvml is not None and r.nvml.field_ids]
        for r in by_field:
            if len(TABLE_FIELDS[r.field]) != 1:
                raise ValueError(f"{r.field}: several field IDs need a hook (which one wins?)")
        self.group = FieldGroup([TABLE_FIELDS[r.field][0] for r in by_field])
        self.convert: tuple[tuple[str, Callable[[Any], Any]], ...] = tuple(
            (r.field, _fast(r)) for r in by_field
        )
        calls: dict[tuple[str, tuple[int, ...]], _Call] = {}
        for r in rows:
            nvml = r.nvml
            if nvml is None or nvml.field_ids:
                continue
            if nvml.call is None or nvml.refresh.kind == "gated":
                raise ValueError(f"{r.field}: no call, or gated by evidence: it needs a hook in {reader}")
            call = calls.get((nvml.call, nvml.args))
            if call is None:
                call = calls[(nvml.call, nvml.args)] = _Call(r)
            call.add(r)
        self.calls = tuple(calls.values())
        self.every = tuple((c.key, c.fn, c.args, c.rows) for c in self.calls if c.kind == "cycle")
        """The calls made every cycle, as read_table takes them apart (decided here, not per cycle)."""
        self.slow = tuple(c for c in self.calls if c.kind != "cycle")
        """The calls kept between cycles: an administrator's setting, or following another reading."""
        mine = {r.field for r in rows}
        self.needs = tuple(
            c.after for c in self.calls if c.after is not None and c.kind == "follows" and c.after not in mine
        )
        """The readings of other readers these rows follow (checked against the readers' order)."""


def read_table(ctx: DeviceContext, rows: TableRows) -> Fields:
    """The values of ``rows`` this cycle, in base units (a field value absent: None; a call that
    answered nothing: no key). Runs for three readers of every GPU every cycle: what each call needs
    was taken apart at import (:class:`TableRows`), so the loops below only call and convert."""
    out: dict[str, Any] = {}
    if rows.convert:
        values = ctx.field_values.values(rows.group)
        for (name, convert), value in zip(rows.convert, values, strict=True):
            out[name] = None if value is None else convert(value)
    nvml, scope, handle = ctx.nvml, ctx.scope, ctx.handle
    for key, fn, args, answers in rows.every:
        answer = nvml.call(scope, key, fn, handle, *args)
        if answer is not ABSENT:
            for field, take, convert in answers:
                out[field] = convert(answer if take is None else take(answer))
    for call in rows.slow:
        token = None
        if call.kind == "follows":  # asked again when what it follows changed; every cycle where not known
            after = call.after
            token = out[after] if after in out else ctx.fields.get(after)  # type: ignore[misc]
        if token is None and call.kind == "follows":
            answer = nvml.call(scope, call.key, call.fn, handle, *call.args)
        else:
            asked = (handle, *call.args)
            answer = ctx.slow.call_args(nvml, ctx.timestamp, scope, call.key, call.fn, asked, token)
        if answer is not ABSENT:
            for field, take, convert in call.rows:
                out[field] = convert(answer if take is None else take(answer))
    return out  # type: ignore[return-value]  # the table's fields (ReadingFields keys)
