"""The GPU's NVLink fabric attachment: ``nvmlDeviceGetGpuFabricInfoV`` (state, status, clique,
cluster UUID, health mask; :mod:`falcon_gpu.model.fabric` says what they mean).

Asked with the slow readings (:meth:`SlowReadings.kept`, once a minute): registration and the
fabric's health change when a fabric manager or a switch does, and a minute is as soon as an
operator acts on it. The struct is nvidia-ml-py's ``c_nvmlGpuFabricInfo_v2_t`` (its ``version``
set by its constructor), handed to NVML by pointer as the C function wants it. A GPU without a
fabric (before Hopper, a PCIe board, a standalone B200) answers NOT_SUPPORTED, or SUCCESS with
state NOT_SUPPORTED: both are "no fabric" and leave the reading out; so does a driver without the
function (before R550: FUNCTION_NOT_FOUND, not called again) or one that refuses the struct's
version (ARGUMENT_VERSION_MISMATCH, taken as NOT_SUPPORTED: asking again cannot change it). Most GPUs
have no fabric, so that answer is remembered without an INFO line per GPU (logged at debug).
"""

from __future__ import annotations

import ctypes
import logging
from types import MappingProxyType
from typing import Any, Final

import pynvml

from falcon_gpu.model.fabric import FabricReading, decode_health
from falcon_gpu.sources.nvml.calls import ABSENT, NvmlCaller
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields

log = logging.getLogger("falcon_gpu.nvml")

FIELD: Final = "fabric"
FUNCTION: Final = "nvmlDeviceGetGpuFabricInfoV"
_STRUCT: Any = getattr(pynvml, "c_nvmlGpuFabricInfo_v2_t", None)
"""None in a nvidia-ml-py that predates the function (then the reading is never asked)."""
_REFUSED: Final = object()
_ANSWERS: Final = MappingProxyType(
    {pynvml.NVML_ERROR_NOT_SUPPORTED: _REFUSED, pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH: _REFUSED}
)


def cluster_uuid(raw: bytes) -> str:
    """16 bytes -> ``8-4-4-4-12`` lower-case hex."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def ask_fabric(nvml: NvmlCaller, scope: str, handle: Any) -> FabricReading | None:
    """One call; None where the GPU has no fabric (see the module docstring)."""
    if _STRUCT is None or not nvml.supported(scope, FIELD):
        return None
    info = _STRUCT()
    answer = nvml.call(scope, FIELD, FUNCTION, handle, ctypes.pointer(info), answers=_ANSWERS)
    if answer is _REFUSED:
        nvml.mark_not_supported(scope, FIELD, quiet=True)
        log.debug("NVML: no NVLink fabric on %s (%s refused); not asking again", scope, FUNCTION)
        return None
    if answer is ABSENT or info.state == pynvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED:
        return None
    mask = int(info.healthMask)
    return FabricReading(
        state=int(info.state),
        status=int(info.status),
        clique_id=int(info.cliqueId),
        cluster_uuid=cluster_uuid(bytes(info.clusterUuid)),
        health_mask=mask,
        health=decode_health(mask),
    )


def read_fabric(ctx: DeviceContext) -> Fields:
    reading = ctx.slow.kept(ctx.nvml, ctx.timestamp, ctx.scope, FIELD, ask_fabric, ctx.nvml, ctx.scope,
                            ctx.handle)  # fmt: skip
    return {} if reading is None else {"fabric": reading}
