"""Simulated NVML GPM: ``nvmlGpmQueryDeviceSupport``, sample alloc/get/free, ``nvmlGpmMetricsGet``.

Served as a driver serves them, with pynvml's own structs: a sample is a real
``c_nvmlGpmSample_t`` (an opaque pointer; its address names the simulator's record of when and
of what it was taken), ``nvmlGpmMetricsGet`` fills the caller's ``c_nvmlGpmMetricsGet_t`` in
place, one ``nvmlReturn`` per metric. A metric is the mean of the scenario's per-cycle percent
over the cycles between the two samples (after the first, up to and including the second),
which is what a rate between two counter snapshots is.

A device with ``gpm`` in its scenario is Hopper-class: ``isSupportedDevice`` 1. Without it,
Ampere-class: ``isSupportedDevice`` 0 and NOT_SUPPORTED for samples. ``gpm`` named in
``not_supported`` models a driver without GPM: NOT_SUPPORTED for the probe too. A MIG GPU
instance is sampled through ``nvmlGpmMigSampleGet(parent, gpu_instance_id)``; an instance
without its own ``gpm`` answers NOT_SUPPORTED. ``sim.gpm_samples`` counts live samples, so
tests can check that the agent frees them.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import msgspec
import pynvml

from falcon_gpu.simulator.nvml.core import SimCore, SimDevice, fail
from falcon_gpu.simulator.scenario.model import GPM_KEYS, Gpm
from falcon_gpu.simulator.scenario.parse import at

_KEY_OF_METRIC: dict[int, str] = {
    pynvml.NVML_GPM_METRIC_SM_UTIL: "sm_active_percent",
    pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: "sm_occupancy_percent",
    pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: "tensor_active_percent",
    pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: "dram_active_percent",
    pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL: "graphics_active_percent",
    pynvml.NVML_GPM_METRIC_FP64_UTIL: "fp64_active_percent",
    pynvml.NVML_GPM_METRIC_FP32_UTIL: "fp32_active_percent",
    pynvml.NVML_GPM_METRIC_FP16_UTIL: "fp16_active_percent",
}
assert set(_KEY_OF_METRIC.values()) == set(GPM_KEYS)


class _Taken(msgspec.Struct, frozen=True, gc=False):
    """What a sample holds: whose activity, as of which cycle."""

    gpm: Gpm
    scope: tuple[int, int | None]
    cycle: int


_SAMPLE = pynvml.c_nvmlGpmSample_t
_POINTER = ctypes.c_void_p.from_buffer
_GET = pynvml.c_nvmlGpmMetricsGet_t
METRICS_GET_HEAD = struct.Struct("@IIPP")
"""version, numMetrics, sample1, sample2: how ``c_nvmlGpmMetricsGet_t`` starts (checked against ctypes
in the simulator tests). The request is read and answered in its bytes: pynvml's structs route every
attribute through Python, which would make the simulator the cost of a metrics call."""
_METRICS_AT, _METRICS_LEN = _GET.metrics.offset, _GET.metrics.size // ctypes.sizeof(pynvml.c_nvmlGpmMetric_t)
_METRIC_SIZE = ctypes.sizeof(pynvml.c_nvmlGpmMetric_t)
_ID_AT, _RETURN_AT, _VALUE_AT = (
    getattr(pynvml.c_nvmlGpmMetric_t, f).offset for f in ("metricId", "nvmlReturn", "value")
)
_UINT, _DOUBLE = struct.Struct("@I"), struct.Struct("@d")


def _address(sample: Any) -> int:
    if type(sample) is _SAMPLE:
        address = _POINTER(sample).value  # the pointer's own bytes (ctypes.cast costs three times more)
    else:
        address = ctypes.cast(sample, ctypes.c_void_p).value if sample is not None else None
    if not address:
        fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    return address


class GpmCalls(SimCore):
    @property
    def gpm_samples(self) -> int:
        """Samples allocated and not freed."""
        return len(self._gpm_records)

    def _gpm_live(self) -> dict[int, _Taken | None]:
        return self._gpm_records

    def _gpm_of(self, dev: SimDevice) -> Gpm:
        if not dev.gpu.supports("gpm") or dev.gpu.gpm is None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return dev.gpu.gpm

    def nvmlGpmQueryDeviceSupport(self, device: Any) -> Any:
        dev = self._device(device, "nvmlGpmQueryDeviceSupport")
        if not dev.gpu.supports("gpm"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        answer = pynvml.c_nvmlGpmSupport_t()
        answer.version = pynvml.NVML_GPM_SUPPORT_VERSION
        answer.isSupportedDevice = int(dev.gpu.gpm is not None)
        return answer

    def nvmlGpmSampleAlloc(self) -> Any:
        self._enter("nvmlGpmSampleAlloc")
        self._gpm_next += 0x100
        address = self._gpm_next
        self._gpm_live()[address] = None
        return ctypes.cast(ctypes.c_void_p(address), pynvml.c_nvmlGpmSample_t)

    def nvmlGpmSampleFree(self, gpmSample: Any) -> None:
        self._enter("nvmlGpmSampleFree")
        if self._gpm_live().pop(_address(gpmSample), False) is False:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def _take(self, gpmSample: Any, taken: _Taken) -> Any:
        address = _address(gpmSample)
        live = self._gpm_live()
        if address not in live:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        live[address] = taken
        return gpmSample

    def nvmlGpmSampleGet(self, device: Any, gpmSample: Any) -> Any:
        dev = self._device(device, "nvmlGpmSampleGet")
        return self._take(gpmSample, _Taken(self._gpm_of(dev), (dev.index, None), self.cycle))

    def nvmlGpmMigSampleGet(self, device: Any, gpuInstanceId: int, gpmSample: Any) -> Any:
        dev = self._device(device, "nvmlGpmMigSampleGet")
        self._gpm_of(dev)
        mig = next((m for m in self.instances(dev) if m.gpu_instance_id == gpuInstanceId), None)
        if mig is None:
            fail(pynvml.NVML_ERROR_NOT_FOUND)
        if mig.gpm is None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self._take(gpmSample, _Taken(mig.gpm, (dev.index, gpuInstanceId), self.cycle))

    def nvmlGpmMetricsGet(self, metricsGet: Any) -> Any:
        """Fills the caller's ``c_nvmlGpmMetricsGet_t`` in place, in its bytes (:data:`METRICS_GET_HEAD`)."""
        self._enter("nvmlGpmMetricsGet")
        raw = memoryview(metricsGet).cast("B")  # as pynvml, which passes it by reference: a ctypes struct
        version, count, sample1, sample2 = METRICS_GET_HEAD.unpack_from(raw)
        if version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            fail(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        if not sample1 or not sample2:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        live = self._gpm_live()
        first, second = live.get(sample1), live.get(sample2)
        if first is None or second is None or first.scope != second.scope:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if count > _METRICS_LEN:
            raise IndexError("invalid index")  # what indexing pynvml's metrics array says
        cycles = range(first.cycle + 1, second.cycle + 1) if second.cycle > first.cycle else (second.cycle,)
        for offset in range(_METRICS_AT, _METRICS_AT + count * _METRIC_SIZE, _METRIC_SIZE):
            (metric_id,) = _UINT.unpack_from(raw, offset + _ID_AT)
            series = second.gpm.get(_KEY_OF_METRIC.get(metric_id, ""))
            if series is None:
                _UINT.pack_into(raw, offset + _RETURN_AT, pynvml.NVML_ERROR_NOT_SUPPORTED)
                continue
            _UINT.pack_into(raw, offset + _RETURN_AT, pynvml.NVML_SUCCESS)
            _DOUBLE.pack_into(raw, offset + _VALUE_AT, sum(at(series, c) for c in cycles) / len(cycles))
        return metricsGet
