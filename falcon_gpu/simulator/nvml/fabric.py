"""Simulated ``nvmlDeviceGetGpuFabricInfoV``: a GPU's NVLink fabric attachment, from its ``fabric`` key.

Served as a driver serves it: the caller hands a pointer to nvidia-ml-py's ``c_nvmlGpuFabricInfo_v2_t``
(or ``_v3_t``) whose ``version`` its constructor set, and the simulator fills it in place (another
version answers ARGUMENT_VERSION_MISMATCH). A GPU without ``fabric`` in its scenario, or with
``fabric`` in ``not_supported``, answers NOT_SUPPORTED, as every GPU before Hopper does.
"""

from __future__ import annotations

from typing import Any

import pynvml

from falcon_gpu.simulator.nvml.core import SimCore, fail
from falcon_gpu.simulator.scenario.parse import at

_VERSIONS = frozenset(
    v
    for v in (getattr(pynvml, "nvmlGpuFabricInfo_v2", None), getattr(pynvml, "nvmlGpuFabricInfo_v3", None))
    if v
)


class FabricCalls(SimCore):
    def nvmlDeviceGetGpuFabricInfoV(self, device: Any, gpuFabricInfo: Any) -> int:
        dev = self._device(device, "nvmlDeviceGetGpuFabricInfoV")
        fabric = dev.gpu.fabric
        if fabric is None or not dev.gpu.supports("fabric"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        info = getattr(gpuFabricInfo, "contents", None)  # a ctypes pointer, as the C function wants
        if info is None:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if info.version not in _VERSIONS:
            fail(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        info.clusterUuid[:] = fabric.cluster_uuid
        info.status = fabric.status
        info.cliqueId = fabric.clique_id
        info.state = int(at(fabric.state, self.cycle))
        info.healthMask = fabric.health_mask
        return int(pynvml.NVML_SUCCESS)
