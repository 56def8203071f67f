"""Memory and board health: ECC totals, retired pages, remapped rows, PCIe replays, infoROM.

All but the infoROM come from the device's batched field values
(:mod:`falcon_gpu.sources.nvml.field_values`); on drivers without them each
group falls back to its own calls: ``nvmlDeviceGetTotalEccErrors`` per counter,
the retired page lists (counted per cause, Kepler to Volta; A100 and later use
row remapping and answer NOT_SUPPORTED for pages), ``nvmlDeviceGetRemappedRows``
and ``nvmlDeviceGetPcieReplayCounter``. ``nvmlDeviceValidateInforom`` answers
success or CORRUPTED_INFOROM, both of which are answers, not errors; it is an
administrator-level fact, re-read once a minute.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final

import pynvml

from falcon_gpu.model.snapshot import EccCounts, RemappedRows, RetiredPages
from falcon_gpu.sources.nvml.calls import ABSENT
from falcon_gpu.sources.nvml.field_values import (
    ECC,
    PCIE_REPLAYS,
    REMAPPED,
    RETIRED,
    FieldGroup,
    FieldSpec,
    UseCall,
)
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields

_GROUP = FieldGroup((*ECC, *RETIRED, *REMAPPED, PCIE_REPLAYS))
"""Every field of the reader: on the usual answer (all of them asked and answered) one look-up
(:meth:`FieldBatch.fast`) gives them all; otherwise each group takes its own path below."""


def _ecc(ctx: DeviceContext) -> EccCounts | None:
    values = [ctx.field_values.value(ctx.nvml, spec) for spec in ECC]
    counts = [None if v is ABSENT else int(v) for v in values]
    return None if all(c is None for c in counts) else EccCounts(*counts)


def _group(ctx: DeviceContext, specs: tuple[FieldSpec, ...]) -> list[float | None] | None:
    """The group's field values (None each where absent), or None: use the group's own calls."""
    values = [ctx.field_values.get(spec) for spec in specs]
    if any(isinstance(v, UseCall) for v in values):
        return None
    return [v for v in values if not isinstance(v, UseCall)]


def _retired_pages_by_call(ctx: DeviceContext) -> RetiredPages | None:
    call, scope, h = ctx.nvml.call, ctx.scope, ctx.handle
    single = call(scope, "retired_pages", "nvmlDeviceGetRetiredPages", h,
                  pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)  # fmt: skip
    if single is ABSENT:
        return None
    double = call(scope, "retired_pages", "nvmlDeviceGetRetiredPages", h,
                  pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)  # fmt: skip
    if double is ABSENT:
        return None
    pending = call(scope, "retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus", h)
    return RetiredPages(len(single), len(double), None if pending is ABSENT else bool(pending))


def _retired_pages(ctx: DeviceContext) -> RetiredPages | None:
    values = _group(ctx, RETIRED)
    if values is None:
        return _retired_pages_by_call(ctx)
    single, double, pending = values
    if single is None or double is None:
        return None
    return RetiredPages(int(single), int(double), None if pending is None else bool(pending))


def _remapped_rows(ctx: DeviceContext) -> RemappedRows | None:
    rows: Any = _group(ctx, REMAPPED)
    if rows is None:
        rows = ctx.nvml.call(ctx.scope, "remapped_rows", "nvmlDeviceGetRemappedRows", ctx.handle)
        if rows is ABSENT:
            return None
    if any(v is None for v in rows):
        return None
    correctable, uncorrectable, pending, failed = rows
    return RemappedRows(int(correctable), int(uncorrectable), bool(pending), bool(failed))


def _from_batch(numbers: tuple[Any, ...]) -> Fields:
    """The usual answer's fields (every one a number), sliced in ``_GROUP`` order."""
    c_vol, u_vol, c_agg, u_agg, single, double, pending, r_cor, r_unc, r_pending, r_failed, replays = numbers
    return {
        "ecc": EccCounts(int(c_vol), int(u_vol), int(c_agg), int(u_agg)),
        "retired_pages": RetiredPages(int(single), int(double), bool(pending)),
        "remapped_rows": RemappedRows(int(r_cor), int(r_unc), bool(r_pending), bool(r_failed)),
        "pcie_replays": int(replays),
    }


def _by_field(ctx: DeviceContext) -> Fields:
    """Each group on its own: a field not supported or answered by a dedicated call, a failed field."""
    out: Fields = {
        "ecc": _ecc(ctx),
        "retired_pages": _retired_pages(ctx),
        "remapped_rows": _remapped_rows(ctx),
    }
    replays = ctx.field_values.value(ctx.nvml, PCIE_REPLAYS)
    if replays is not ABSENT:
        out["pcie_replays"] = int(replays)
    return out


_LAST = "health_numbers"
"""The caller's memo key of each scope's last usual answer: (its numbers, the fields made of them)."""


def _remembered(ctx: DeviceContext, numbers: tuple[Any, ...]) -> Fields:
    """:func:`_from_batch`, kept as the scope's last usual answer: while its numbers stay the same (counters
    that sit at 0 on a healthy GPU), :func:`read_health` answers a copy of those fields, the same records,
    not new ones, every cycle."""
    last_by_scope: dict[str, tuple[tuple[Any, ...], Fields]] = ctx.nvml.memo.setdefault(_LAST, {})
    out = _from_batch(numbers)
    last_by_scope[ctx.scope] = (numbers, out.copy())
    return out


_CORRUPTED: Final = MappingProxyType({pynvml.NVML_ERROR_CORRUPTED_INFOROM: False})
"""The infoROM check's answer "corrupted" (built once, not per GPU and cycle)."""


def read_health(ctx: DeviceContext) -> Fields:
    numbers = ctx.field_values.fast(_GROUP)
    if numbers is None:
        out = _by_field(ctx)
    else:  # the last cycle's fields where its numbers were the same, else new ones
        last_by_scope: dict[str, tuple[tuple[Any, ...], Fields]] | None = ctx.nvml.memo.get(_LAST)
        last = None if last_by_scope is None else last_by_scope.get(ctx.scope)
        out = last[1].copy() if last is not None and last[0] == numbers else _remembered(ctx, numbers)
    valid = ctx.slow.call(
        ctx.nvml, ctx.timestamp, ctx.scope, "inforom", "nvmlDeviceValidateInforom", ctx.handle,
        answers=_CORRUPTED,
    )  # fmt: skip
    if valid is not ABSENT:
        out["inforom_valid"] = valid is not False
    return out
