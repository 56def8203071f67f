"""GPM (GPU Performance Monitoring, Hopper and later): SM activity and occupancy, tensor, DRAM, FP pipes.

GPM metrics are rates between two samples, so the reader keeps the previous sample of every
GPU and every MIG GPU instance (:class:`GpmSamples`, owned by the source) and, each cycle,
takes a new one (``nvmlGpmSampleGet``; ``nvmlGpmMigSampleGet(parent, gpu_instance_id)`` for an
instance) and asks ``nvmlGpmMetricsGet`` for :data:`METRICS` between the two. The first cycle
after start (or after a GPU came back) has one sample only: the reading is absent, not 0.

Two samples per scope are allocated once (``nvmlGpmSampleAlloc``) and used in turn, so a cycle
costs two NVML calls per GPU and per instance, never an allocation. The two metrics requests between
them (one per direction) are built with them, so a cycle writes nothing into a pynvml struct, and
the answer is read from the request's bytes by one prebuilt ``struct``. The samples are freed
(``nvmlGpmSampleFree``) on close, when the GPU is lost, when an instance disappears and when
GPM turns out not to work on a device.

Support is probed once per GPU with ``nvmlGpmQueryDeviceSupport`` (``isSupportedDevice`` 0 on
Ampere and older; NOT_SUPPORTED or a missing function on a driver or pynvml without GPM) and
once per instance by its first sample: unsupported is "absent", logged once
(:class:`~falcon_gpu.sources.nvml.calls.NvmlCaller` remembers it).
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any, Final

import pynvml

from falcon_gpu.model.snapshot import GPM_METRICS, GpmReading
from falcon_gpu.sources.nvml.calls import ABSENT, DeviceGone, NvmlCaller

METRICS: tuple[int, ...] = tuple(
    getattr(pynvml, f"NVML_GPM_METRIC_{name}", number)
    for name, number in (
        ("SM_UTIL", 2), ("SM_OCCUPANCY", 3), ("ANY_TENSOR_UTIL", 5), ("DRAM_BW_UTIL", 10),
        ("GRAPHICS_UTIL", 1), ("FP64_UTIL", 11), ("FP32_UTIL", 12), ("FP16_UTIL", 13),
    )
)  # fmt: skip
"""NVML's metric IDs, in :class:`GpmReading` field order (every one a percent, 0-100). The numbers are
nvml.h's, for a pynvml too old to name them (it then has no GPM struct either: GPM is "absent")."""


_HEAD: Final = "IId"
"""The head of ``c_nvmlGpmMetric_t`` in C: metricId, nvmlReturn, value (then the metric's names)."""
_METRIC: Final = struct.Struct("@" + _HEAD)
_GET = getattr(pynvml, "c_nvmlGpmMetricsGet_t", None)
_ONE = getattr(pynvml, "c_nvmlGpmMetric_t", None)
_FIRST: Final = 0 if _GET is None else _GET.metrics.offset
"""Where the first metric's answer starts in the request struct."""
_METRICS_LAYOUT: Final = struct.Struct(
    "@" + (f"{_HEAD}{ctypes.sizeof(_ONE) - _METRIC.size}x" if _ONE is not None else _HEAD) * len(GPM_METRICS)
)
"""All the requested metrics' heads, their names skipped: one ``unpack_from`` per reading."""
_LAYOUT_OK: Final = (
    _GET is not None
    and _ONE is not None
    and ((_ONE.nvmlReturn.offset, _ONE.value.offset) == (4, 8) and _METRIC.size == 16)
    and _FIRST + _METRICS_LAYOUT.size <= ctypes.sizeof(_GET)
)
"""The bytes path is taken only where ctypes lays the struct out as :data:`_METRICS_LAYOUT` reads it
(checked against the attribute path in the tests)."""
_ALL_SUCCESS: Final = (pynvml.NVML_SUCCESS,) * len(GPM_METRICS)


def _from_bytes(view: memoryview) -> GpmReading:
    """The metrics in a request's bytes (``view``: kept with the request, which is reused)."""
    flat = _METRICS_LAYOUT.unpack_from(view, _FIRST)
    values = flat[2::3]
    if flat[1::3] == _ALL_SUCCESS:  # the usual answer: every metric
        return GpmReading(*[value / 100.0 for value in values])
    return GpmReading(*[
        value / 100.0 if ret == pynvml.NVML_SUCCESS else None
        for ret, value in zip(flat[1::3], values, strict=True)
    ])  # fmt: skip


def reading(request: Any, *, from_bytes: bool = True) -> GpmReading:
    """The metrics ``nvmlGpmMetricsGet`` wrote into ``request`` (percent -> ratio; None where refused)."""
    if from_bytes and _LAYOUT_OK:  # pynvml's structs route every attribute read through Python
        return _from_bytes(memoryview(request).cast("B"))
    metrics = request.metrics
    return GpmReading(*(
        float(m.value) / 100.0 if m.nvmlReturn == pynvml.NVML_SUCCESS else None
        for m in (metrics[i] for i in range(len(GPM_METRICS)))
    ))  # fmt: skip


def _request(older: Any, newer: Any) -> tuple[Any, memoryview]:
    """A metrics request between two samples, and its bytes: built once per scope and direction (the
    samples are used in turn, so only two requests ever exist per scope and none is rewritten)."""
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = getattr(pynvml, "NVML_GPM_METRICS_GET_VERSION", 1)
    request.numMetrics = len(METRICS)
    for i, metric in enumerate(METRICS):
        request.metrics[i].metricId = metric
    request.sample1 = older
    request.sample2 = newer
    return request, memoryview(request).cast("B")


class _Scope:
    """The two samples of one GPU or GPU instance, which one holds the previous cycle, and the two
    metrics requests between them (``requests[i]``: from the other sample to sample ``i``)."""

    __slots__ = ("previous", "requests", "samples")

    def __init__(self, samples: tuple[Any, Any]) -> None:
        self.samples = samples
        self.previous: int | None = None
        """Index of the sample taken last cycle; None: no sample yet."""
        self.requests = (_request(samples[1], samples[0]), _request(samples[0], samples[1]))


class GpmSamples:
    """Per source: each GPU's and instance's samples; frees them when a device goes away."""

    def __init__(self, nvml: NvmlCaller) -> None:
        self._nvml = nvml
        self._scopes: dict[str, _Scope] = {}
        self._parent: dict[str, str] = {}
        """Instance scope -> its GPU's scope (to free them with the GPU)."""
        self._supported: dict[str, bool] = {}
        self._instance_scopes: dict[tuple[str, int], str] = {}

    def instance_scope(self, parent: str, gpu_instance_id: int) -> str:
        """The key of a GPU instance's samples and not-supported answers (built once per instance)."""
        key = (parent, gpu_instance_id)
        scope = self._instance_scopes.get(key)
        if scope is None:
            scope = self._instance_scopes[key] = f"{parent}/gi{gpu_instance_id}"
        return scope

    def supported(self, scope: str, handle: Any) -> bool:
        """Whether the GPU has GPM, probed once (absent functions, NOT_SUPPORTED: no)."""
        known = self._supported.get(scope)
        if known is None:
            answer = self._nvml.call(scope, "gpm", "nvmlGpmQueryDeviceSupport", handle)
            if answer is ABSENT and self._nvml.supported(scope, "gpm") and self._nvml.errors:
                return False  # a failed probe, not an answer: ask again next cycle
            known = answer is not ABSENT and bool(getattr(answer, "isSupportedDevice", 0))
            if answer is not ABSENT and not known:
                self._nvml.unsupported.note(scope, "GPM (Hopper and later have it)")
            known = known and getattr(pynvml, "c_nvmlGpmMetricsGet_t", None) is not None
            self._supported[scope] = known
        return known

    def sample(self, scope: str, fn: str, *args: Any, parent: str | None = None) -> GpmReading | None:
        """Take this cycle's sample of ``scope`` with ``fn(*args, sample)``; the metrics since the
        previous one, or None (first sample, not supported, failed). A scope found not supported has
        no samples, and every call on it answers ABSENT: no separate support look-up per cycle."""
        state = self._scopes.get(scope)
        if state is None:
            state = self._allocate(scope)
            if state is None:
                return None
            if parent is not None:
                self._parent[scope] = parent
        current = 0 if state.previous != 0 else 1
        taken = self._nvml.call(scope, "gpm", fn, *args, state.samples[current])
        if taken is ABSENT:
            state.previous = None
            if not self._nvml.supported(scope, "gpm"):
                self.forget(scope)
            return None
        previous, state.previous = state.previous, current
        if previous is None:
            return None
        request, view = state.requests[current]
        if self._nvml.call(scope, "gpm_metrics", "nvmlGpmMetricsGet", request) is ABSENT:
            return None
        return _from_bytes(view) if _LAYOUT_OK else reading(request, from_bytes=False)

    def _allocate(self, scope: str) -> _Scope | None:
        first = self._nvml.call(scope, "gpm", "nvmlGpmSampleAlloc")
        if first is ABSENT:
            return None
        second = self._nvml.call(scope, "gpm", "nvmlGpmSampleAlloc")
        if second is ABSENT:
            self._nvml.call(scope, "gpm_free", "nvmlGpmSampleFree", first)
            return None
        state = self._scopes[scope] = _Scope((first, second))
        return state

    def forget(self, scope: str) -> None:
        """Free ``scope``'s samples, and its instances' (a lost GPU, an instance gone, close)."""
        for child in [c for c, p in self._parent.items() if p == scope]:
            self.forget(child)
        self._parent.pop(scope, None)
        state = self._scopes.pop(scope, None)
        if state is not None:
            errors = self._nvml.errors
            before = len(errors)
            for sample in state.samples:
                try:
                    self._nvml.call(scope, "gpm_free", "nvmlGpmSampleFree", sample)
                except DeviceGone:  # NVML itself is gone: so is the memory it allocated
                    break
            del errors[before:]  # a sample that cannot be freed is no reading's error

    def retain(self, parent: str, instances: set[str]) -> None:
        """Free the samples of ``parent``'s instances that are not in ``instances`` any more."""
        for child in [c for c, p in self._parent.items() if p == parent and c not in instances]:
            self.forget(child)

    def close(self) -> None:
        for scope in list(self._scopes):
            self.forget(scope)
        self._supported.clear()

    @property
    def live(self) -> int:
        """Samples allocated now (for tests: a lost GPU's are freed)."""
        return 2 * len(self._scopes)
