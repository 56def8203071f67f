"""Framebuffer memory: used, free, total and (memory info v2 only) reserved, in bytes.

v2 (``nvmlDeviceGetMemoryInfo(h, version=nvmlMemory_v2)``) separates the memory
the driver reserves from what processes use; drivers or bindings without it
answer FUNCTION_NOT_FOUND / ARGUMENT_VERSION_MISMATCH / NOT_SUPPORTED (or the
binding has no ``version`` argument), and v1 is used from then on.
"""

from __future__ import annotations

from typing import Any

import pynvml

from falcon_gpu.sources.nvml.calls import ABSENT, VARIANT_FALLBACK
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields

MEMORY_FALLBACK = VARIANT_FALLBACK | {pynvml.NVML_ERROR_NOT_SUPPORTED}


def memory_info(ctx: DeviceContext, handle: Any, scope: str) -> Any:
    """The memory struct of ``handle`` (a device or MIG handle), or ABSENT."""
    variants = []
    version = getattr(ctx.nvml.lib, "nvmlMemory_v2", None)
    if version is not None:
        variants.append(("v2", "nvmlDeviceGetMemoryInfo", (handle,), {"version": version}))
    variants.append(("v1", "nvmlDeviceGetMemoryInfo", (handle,), {}))
    return ctx.nvml.call_first(scope, "memory_info", "memory_info", variants, MEMORY_FALLBACK)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def read_memory(ctx: DeviceContext) -> Fields:
    info = memory_info(ctx, ctx.handle, ctx.scope)
    if info is ABSENT:
        return {}
    return {
        "memory_total_bytes": _int(info.total),
        "memory_used_bytes": _int(info.used),
        "memory_free_bytes": _int(info.free),
        "memory_reserved_bytes": _int(getattr(info, "reserved", None)),
    }
