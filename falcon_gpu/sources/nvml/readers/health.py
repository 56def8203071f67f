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
from falcon_gpu.sources.nvml.field_values import ECC, PCIE_REPLAYS, REMAPPED, RETIRED, FieldGroup
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields

_GROUP = FieldGroup((*ECC, *RETIRED, *REMAPPED, PCIE_REPLAYS))
"""Every field of the reader, in one look-up (a field the driver lacks comes from its dedicated call:
the ECC counter, each cause's retired page list, the remapped rows, the replay counter)."""


def _health(numbers: tuple[Any, ...]) -> Fields:
    """The reader's fields from :data:`_GROUP`'s values (None each where absent)."""
    c_vol, u_vol, c_agg, u_agg, single, double, pending, r_cor, r_unc, r_pending, r_failed, replays = numbers
    ecc = (c_vol, u_vol, c_agg, u_agg)
    rows = (r_cor, r_unc, r_pending, r_failed)
    out: Fields = {
        "ecc": None if ecc == _NO_ECC else EccCounts(*(None if c is None else int(c) for c in ecc)),
        "retired_pages": None if single is None or double is None
        else RetiredPages(int(single), int(double), None if pending is None else bool(pending)),
        "remapped_rows": None if None in rows
        else RemappedRows(int(r_cor), int(r_unc), bool(r_pending), bool(r_failed)),
    }  # fmt: skip
    if replays is not None:
        out["pcie_replays"] = int(replays)
    return out


_NO_ECC: Final = (None, None, None, None)


_CORRUPTED: Final = MappingProxyType({pynvml.NVML_ERROR_CORRUPTED_INFOROM: False})
"""The infoROM check's answer "corrupted" (built once, not per GPU and cycle)."""


def read_health(ctx: DeviceContext) -> Fields:
    numbers = ctx.field_values.values(_GROUP)
    # Each scope's last answer (``ctx.state.health``): while the numbers stay the same (counters that sit
    # at 0 on a healthy GPU), a copy of the fields made of them, the same records, not new ones.
    last_by_scope = ctx.state.health
    last = last_by_scope.get(ctx.scope)
    if last is not None and last[0] == numbers:
        out = last[1].copy()
    else:
        out = _health(numbers)
        last_by_scope[ctx.scope] = (numbers, out.copy())
    valid = ctx.slow.call(
        ctx.nvml, ctx.timestamp, ctx.scope, "inforom", "nvmlDeviceValidateInforom", ctx.handle,
        answers=_CORRUPTED,
    )  # fmt: skip
    if valid is not ABSENT:
        out["inforom_valid"] = valid is not False
    return out
