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
from typing import Any, Final, cast

from falcon_gpu.readings.device import READINGS
from falcon_gpu.readings.spec import Reading
from falcon_gpu.sources.nvml.calls import ABSENT
from falcon_gpu.sources.nvml.field_values import TABLE_FIELDS, FieldGroup
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields


class _Call:
    """One row read by its call: the call (shared by the rows whose function and arguments are the
    same: its not-supported key is the first one's field), the member and the conversion."""

    __slots__ = ("after", "args", "field", "fn", "from_nvml", "key", "kind", "member")

    def __init__(self, row: Reading, key: str) -> None:
        nvml = row.nvml
        assert nvml is not None and nvml.call is not None
        self.field = row.field
        self.key = key
        self.fn = nvml.call
        self.args = nvml.args
        self.member = nvml.member
        self.from_nvml = row.from_nvml
        self.kind = nvml.refresh.kind
        self.after = nvml.refresh.after


class TableRows:
    """The rows of the reading table that ``reader`` reads with no code of its own."""

    __slots__ = ("calls", "convert", "group", "needs")

    def __init__(self, reader: str) -> None:
        rows = [r for r in READINGS if r.reader == reader and r.nvml is not None and not r.nvml.hook]
        by_field = [r for r in rows if r.nvml is not None and r.nvml.field_ids]
        for r in by_field:
            if len(TABLE_FIELDS[r.field]) != 1:
                raise ValueError(f"{r.field}: several field IDs need a hook (which one wins?)")
        self.group = FieldGroup([TABLE_FIELDS[r.field][0] for r in by_field])
        self.convert: tuple[tuple[str, Callable[[Any], Any]], ...] = tuple(
            (r.field, r.from_nvml) for r in by_field
        )
        keys: dict[tuple[str | None, tuple[int, ...]], str] = {}
        calls = []
        for r in rows:
            nvml = r.nvml
            if nvml is None or nvml.field_ids:
                continue
            if nvml.call is None or nvml.refresh.kind == "gated":
                raise ValueError(f"{r.field}: no call, or gated by evidence: it needs a hook in {reader}")
            calls.append(_Call(r, keys.setdefault((nvml.call, nvml.args), r.field)))
        self.calls = tuple(calls)
        self.needs = tuple(c.after for c in calls if c.after is not None and c.after not in keys.values())
        """The readings of other readers these rows follow (checked against the readers' order)."""


_NOT_ASKED: Final = object()


def read_table(ctx: DeviceContext, rows: TableRows) -> Fields:
    """The values of ``rows`` this cycle, in base units (a field value absent: None; a call that
    answered nothing: no key)."""
    out: dict[str, Any] = {}
    if rows.convert:
        values = ctx.field_values.values(rows.group)
        for (name, from_nvml), value in zip(rows.convert, values, strict=True):
            out[name] = None if value is None else from_nvml(value)
    if rows.calls:
        answers: dict[str, Any] = {}
        for row in rows.calls:
            answer = answers.get(row.key, _NOT_ASKED)
            if answer is _NOT_ASKED:
                answer = answers[row.key] = _ask(ctx, row, out)
            if answer is ABSENT:
                continue
            member = row.member
            value = (
                answer
                if member is None
                else answer[member]
                if isinstance(member, int)
                else getattr(answer, member)
            )
            out[row.field] = row.from_nvml(value)
    return cast(Fields, out)


def _ask(ctx: DeviceContext, row: _Call, out: dict[str, Any]) -> Any:
    nvml, scope, handle = ctx.nvml, ctx.scope, ctx.handle
    if row.kind == "setting":
        return ctx.slow.call(nvml, ctx.timestamp, scope, row.key, row.fn, handle, *row.args)
    if row.kind == "follows":
        after = row.after or ""
        fields: dict[str, Any] = ctx.fields  # type: ignore[assignment]  # looked up by the table's name
        token = out[after] if after in out else fields.get(after)
        if token is not None:  # else (not known this cycle): asked every cycle
            return ctx.slow.call(nvml, ctx.timestamp, scope, row.key, row.fn, handle, *row.args, token=token)
    return nvml.call(scope, row.key, row.fn, handle, *row.args)
