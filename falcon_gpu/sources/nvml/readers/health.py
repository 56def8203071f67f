"""Memory and board health: ECC totals, retired pages, remapped rows, PCIe replays, infoROM.

Retired pages are counted as the length of the page list per cause (Kepler to
Volta); A100 and later use row remapping instead and answer NOT_SUPPORTED for
pages. ``nvmlDeviceValidateInforom`` answers success or CORRUPTED_INFOROM, both
of which are answers, not errors.
"""

from __future__ import annotations

import pynvml

from falcon_gpu.model.snapshot import EccCounts, RemappedRows, RetiredPages
from falcon_gpu.sources.nvml.calls import ABSENT
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields

_ECC = (
    ("corrected_volatile", pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC),
    ("uncorrected_volatile", pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC),
    ("corrected_aggregate", pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_AGGREGATE_ECC),
    ("uncorrected_aggregate", pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC),
)


def _ecc(ctx: DeviceContext) -> EccCounts | None:
    counts: dict[str, int | None] = {}
    for name, error_type, counter_type in _ECC:
        value = ctx.nvml.call(
            ctx.scope, f"ecc_{name}", "nvmlDeviceGetTotalEccErrors", ctx.handle, error_type, counter_type
        )
        counts[name] = None if value is ABSENT else int(value)
    return EccCounts(**counts) if any(v is not None for v in counts.values()) else None


def _retired_pages(ctx: DeviceContext) -> RetiredPages | None:
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


def _remapped_rows(ctx: DeviceContext) -> RemappedRows | None:
    rows = ctx.nvml.call(ctx.scope, "remapped_rows", "nvmlDeviceGetRemappedRows", ctx.handle)
    if rows is ABSENT:
        return None
    correctable, uncorrectable, pending, failed = rows
    return RemappedRows(int(correctable), int(uncorrectable), bool(pending), bool(failed))


def read_health(ctx: DeviceContext) -> Fields:
    out: Fields = {
        "ecc": _ecc(ctx),
        "retired_pages": _retired_pages(ctx),
        "remapped_rows": _remapped_rows(ctx),
    }
    replays = ctx.nvml.call(ctx.scope, "pcie_replays", "nvmlDeviceGetPcieReplayCounter", ctx.handle)
    if replays is not ABSENT:
        out["pcie_replays"] = int(replays)
    valid = ctx.nvml.call(
        ctx.scope, "inforom", "nvmlDeviceValidateInforom", ctx.handle,
        answers={pynvml.NVML_ERROR_CORRUPTED_INFOROM: False},
    )  # fmt: skip
    if valid is not ABSENT:
        out["inforom_valid"] = valid is not False
    return out
