"""Framebuffer memory: used, free, total and (memory info v2 only) reserved, in bytes.

v2 (``nvmlDeviceGetMemoryInfo(h, version=nvmlMemory_v2)``) separates the memory
the driver reserves from what processes use; drivers or bindings without it
answer FUNCTION_NOT_FOUND / ARGUMENT_VERSION_MISMATCH / NOT_SUPPORTED (or the
binding has no ``version`` argument), and v1 is used from then on.
"""

from __future__ import annotations

from typing import Any, Final

import pynvml

from falcon_gpu.sources.nvml.calls import ABSENT, VARIANT_FALLBACK, Variant
from falcon_gpu.sources.nvml.library import NvmlLibrary
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields
from falcon_gpu.sources.nvml.readers.table import table_call

MEMORY_FALLBACK: Final = VARIANT_FALLBACK | {pynvml.NVML_ERROR_NOT_SUPPORTED}
_MEMORY_INFO = table_call("memory_used_bytes")
_V1: Variant = ("v1", _MEMORY_INFO, {})


def memory_variants(lib: NvmlLibrary) -> tuple[Variant, ...]:
    """v2 then v1, or v1 alone when the binding has no ``nvmlMemory_v2``."""
    version = getattr(lib, "nvmlMemory_v2", None)
    return (("v2", _MEMORY_INFO, {"version": version}), _V1) if version is not None else (_V1,)


def _variants(ctx: DeviceContext) -> tuple[Variant, ...]:
    """:func:`memory_variants` of the source's library, built once (``ctx.state.memory_variants``)."""
    variants = ctx.state.memory_variants
    if variants is None:
        variants = ctx.state.memory_variants = memory_variants(ctx.nvml.lib)
    return variants


def memory_info(ctx: DeviceContext, handle: Any, scope: str) -> Any:
    """The memory struct of ``handle`` (a device or MIG handle), or ABSENT."""
    return ctx.nvml.call_first(
        scope, "memory_info", "memory_info", _variants(ctx), handle, fallback=MEMORY_FALLBACK
    )


def read_memory(ctx: DeviceContext) -> Fields:
    variants = ctx.state.memory_variants  # _variants, written out: once per GPU and cycle
    if variants is None:
        variants = _variants(ctx)
    info = ctx.calls.memory_info(ctx.scope, ctx.handle, variants, MEMORY_FALLBACK)
    if info is ABSENT:
        return {}
    total, used, free, reserved = info.total, info.used, info.free, getattr(info, "reserved", None)
    return {
        "memory_total_bytes": None if total is None else int(total),
        "memory_used_bytes": None if used is None else int(used),
        "memory_free_bytes": None if free is None else int(free),
        "memory_reserved_bytes": None if reserved is None else int(reserved),
    }
