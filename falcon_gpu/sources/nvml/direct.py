"""NVML's C functions called straight, through buffers kept per device: the real bindings' fast path.

pynvml's wrappers build their ctypes structures in Python on every call. Measured on NVIDIA's NVML
mock (docs/BENCHMARKS.md): ``nvmlDeviceGetFieldValues`` sets each field's ``fieldId`` / ``scopeId``
through pynvml's structure attributes, about 1 us a field (41 us for 39 fields, where the C call
itself takes 16 us); ``nvmlDeviceGetComputeRunningProcesses`` makes two calls (a NULL-buffer size
probe, then the list) and a Python object per process through three attribute reads each (17.5 us).
Every GPU asks these every cycle, the same request each time.

So, where the library is the real ``pynvml`` (:func:`~falcon_gpu.sources.nvml.library.c_functions`,
the one seam), the source keeps per device:

- one request array per field list (:class:`FieldRequest`, built once: its IDs and scopes set, its
  bytes kept as the template each call is reset from); the answer is read by the field-values
  decoder in one ``struct`` call (:mod:`falcon_gpu.sources.nvml.field_values`), each value's
  ``nvmlReturn`` and ``valueType`` honoured as before;
- the memory info (``nvmlDeviceGetMemoryInfo_v2``: one kept struct, its version set once);
- one buffer per process list (compute, graphics, MPS; the ``_v3`` C function, pynvml's v3 struct)
  and one for the process-utilisation samples (:class:`DirectCalls`), called once with the buffer's
  capacity: NVML answers INSUFFICIENT_SIZE with the count it needs when the buffer is too small (the
  same answer pynvml's NULL probe gets), and the buffer grows and asks again (so it does after an
  answer that filled it: there may have been more). The answer is unpacked
  by one ``struct`` call into named tuples with pynvml's attribute names, so the readers read both
  paths alike.

A return code other than SUCCESS goes through :meth:`NvmlCaller.code_failed`, the same rules as a
pynvml exception (NOT_SUPPORTED remembered, device-fatal codes raise DeviceGone, others counted). A C
function the library lacks, or a list that answers a version mismatch, takes pynvml's call from then on.
The simulator (which stands in for pynvml at the Python level) gets :class:`PynvmlCalls`: the very
pynvml-level calls the readers made before.
"""

from __future__ import annotations

import ctypes
import struct
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from operator import itemgetter
from typing import Any, Final, NamedTuple

import pynvml

from falcon_gpu.sources.nvml.calls import ABSENT, VARIANT_FALLBACK, NvmlCaller, Variant

_SUCCESS: Final = pynvml.NVML_SUCCESS
_INSUFFICIENT: Final = pynvml.NVML_ERROR_INSUFFICIENT_SIZE
NOT_AVAILABLE_ULL: Final = 0xFFFFFFFFFFFFFFFF
"""``usedGpuMemory`` where the driver cannot tell (pynvml answers None for it; so does this path)."""


class ProcessInfo(NamedTuple):
    """One entry of a process list: ``c_nvmlProcessInfo_v3_t``'s members, by pynvml's names (the
    readers read both paths alike)."""

    pid: int
    usedGpuMemory: int | None
    gpuInstanceId: int
    computeInstanceId: int


class ProcessSample(NamedTuple):
    """One ``c_nvmlProcessUtilizationSample_t``, by pynvml's names."""

    pid: int
    timeStamp: int
    smUtil: int
    memUtil: int
    encUtil: int
    decUtil: int


class MemoryInfo(NamedTuple):
    """``c_nvmlMemory_v2_t``'s numbers, by pynvml's names."""

    total: int
    reserved: int
    free: int
    used: int


_INFO: Final = struct.Struct("@IQII")
_MEMORY_V2: Final = struct.Struct("@IQQQQ")
_SAMPLE: Final = struct.Struct("@IQIIII")


def _matches(struct_name: str, layout: struct.Struct) -> bool:
    """Whether pynvml has the struct and it is ``layout``'s size (an older binding may lack it)."""
    found = getattr(pynvml, struct_name, None)
    return found is not None and ctypes.sizeof(found) == layout.size


USABLE: Final = (
    sys.byteorder == "little"
    and _matches("c_nvmlProcessInfo_v3_t", _INFO)
    and _matches("c_nvmlProcessUtilizationSample_t", _SAMPLE)
    and _matches("c_nvmlMemory_v2_t", _MEMORY_V2)
    and getattr(pynvml, "nvmlMemory_v2", None) is not None
)
"""Whether the layouts above are pynvml's structs (checked at import; else the process lists, samples
and memory info stay pynvml's calls)."""

_new_info: Final = partial(tuple.__new__, ProcessInfo)
_new_sample: Final = partial(tuple.__new__, ProcessSample)
_memory: Final = itemgetter(1)
FIRST_CAPACITY: Final = 16
"""Entries a buffer holds at first (grown to twice what NVML asks for, plus 5, as pynvml sizes it)."""
_GROWS: Final = 4
"""Asks per call at most: a list that keeps outgrowing its buffer is answered INSUFFICIENT_SIZE (or,
from a driver that fills what fits, as much as the last buffer held)."""


class FieldRequest:
    """One ``nvmlDeviceGetFieldValues`` request, built once: the array with each ``fieldId`` and
    ``scopeId`` set, and its bytes as they are then, which every call copies back over the array
    before NVML writes its answers into it (no answer of the last call can pass for this one's)."""

    __slots__ = ("array", "count", "size", "template")

    def __init__(self, ids: Sequence[int | tuple[int, int]]) -> None:
        self.count = len(ids)
        self.array = (pynvml.c_nvmlFieldValue_t * self.count)()
        for value, request in zip(self.array, ids, strict=True):
            if isinstance(request, tuple):
                value.fieldId, value.scopeId = request
            else:
                value.fieldId = request
        self.size = ctypes.sizeof(self.array)
        self.template = bytes(self.array)

    def call(self, fn: Any, handle: Any) -> int:
        """NVML's return code; the answers are in :attr:`array`."""
        ctypes.memmove(self.array, self.template, self.size)
        return int(fn(handle, self.count, self.array))


class _Buffer:
    """An array of ``struct`` entries that NVML fills, with the count it answers; grown on demand."""

    __slots__ = ("array", "bytes", "capacity", "count", "count_ref", "entry", "layout")

    def __init__(self, entry: type[ctypes.Structure], layout: struct.Struct) -> None:
        self.entry = entry
        self.layout = layout
        self.count = ctypes.c_uint(0)
        self.count_ref = ctypes.byref(self.count)
        self.capacity = 0
        self.array: Any = None
        self.bytes = memoryview(b"")
        self.grow(FIRST_CAPACITY)

    def grow(self, capacity: int) -> None:
        self.capacity = capacity
        self.array = (self.entry * capacity)()
        self.bytes = memoryview(self.array).cast("B")

    def rows(self) -> Any:
        """The ``count`` entries NVML wrote, each as a tuple (one ``struct`` call)."""
        return self.layout.iter_unpack(self.bytes[: self.count.value * self.layout.size])

    def read(self, ask: Callable[[], int]) -> int:
        """``ask()`` with the count set to the capacity, grown and asked again while NVML answers
        INSUFFICIENT_SIZE with a larger count, or fills the whole buffer (nvml.h documents
        INSUFFICIENT_SIZE for a NULL buffer only: a driver that fills what fits and answers SUCCESS
        loses nothing either; the samples are asked again with the same ``lastSeen``)."""
        ret: int = _INSUFFICIENT
        for _ in range(_GROWS):
            capacity = self.capacity
            self.count.value = capacity
            ret = ask()
            count = self.count.value
            if ret == _INSUFFICIENT and count > capacity:
                self.grow(count * 2 + 5)
            elif ret == _SUCCESS and count >= capacity:
                self.grow(capacity * 2 + 5)
            else:
                return ret
        return ret


class _ListBuffer(_Buffer):
    """One process list's buffer and its ``_v3`` C function."""

    __slots__ = ("fn", "fn_name", "handle")

    def __init__(self, fn: Any, fn_name: str) -> None:
        super().__init__(pynvml.c_nvmlProcessInfo_v3_t, _INFO)
        self.fn = fn
        self.fn_name = fn_name
        self.handle: Any = None

    def _ask(self) -> int:
        return int(self.fn(self.handle, self.count_ref, self.array))

    def processes(self, handle: Any) -> tuple[int, list[ProcessInfo]]:
        self.handle = handle
        ret = self.read(self._ask)
        self.handle = None
        if ret != _SUCCESS or not self.count.value:
            return ret, []
        found = list(map(_new_info, self.rows()))
        if NOT_AVAILABLE_ULL in map(_memory, found):  # WDDM: pynvml answers None
            found = [
                p._replace(usedGpuMemory=None) if p.usedGpuMemory == NOT_AVAILABLE_ULL else p for p in found
            ]
        return ret, found


class _SampleBuffer(_Buffer):
    __slots__ = ("fn", "handle", "last_seen")

    def __init__(self, fn: Any) -> None:
        super().__init__(pynvml.c_nvmlProcessUtilizationSample_t, _SAMPLE)
        self.fn = fn
        self.handle: Any = None
        self.last_seen = ctypes.c_ulonglong(0)

    def _ask(self) -> int:
        return int(self.fn(self.handle, self.array, self.count_ref, self.last_seen))

    def samples(self, handle: Any, last_seen: int) -> tuple[int, list[ProcessSample]]:
        self.handle = handle
        self.last_seen.value = last_seen
        ret = self.read(self._ask)
        self.handle = None
        return ret, list(map(_new_sample, self.rows())) if ret == _SUCCESS else []


class _MemoryBuffer:
    """The device's ``c_nvmlMemory_v2_t`` with its version set, reset from its template before each
    ``nvmlDeviceGetMemoryInfo_v2`` call and read by one ``struct`` call."""

    __slots__ = ("bytes", "fn", "info", "ref", "size", "template")

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.info = pynvml.c_nvmlMemory_v2_t()
        self.info.version = pynvml.nvmlMemory_v2
        self.template = bytes(self.info)
        self.size = len(self.template)
        self.ref = ctypes.byref(self.info)
        self.bytes = memoryview(self.info).cast("B")

    def read(self, handle: Any) -> int:
        ctypes.memmove(self.ref, self.template, self.size)
        return int(self.fn(handle, self.ref))

    def decoded(self) -> MemoryInfo:
        _, total, reserved, free, used = _MEMORY_V2.unpack(self.bytes)
        return MemoryInfo(total, reserved, free, used)


PROCESS_UTILIZATION: Final = "process_utilization"
MEMORY_INFO: Final = "memory_info"
"""The memory info's not-supported key and variant family."""
_MEMORY_FN: Final = "nvmlDeviceGetMemoryInfo_v2"
"""The not-supported key of the process-utilisation samples."""
_SAMPLES_FN: Final = "nvmlDeviceGetProcessUtilization"
_LIST_FN: Final = {
    "processes_compute": "nvmlDeviceGetComputeRunningProcesses_v3",
    "processes_graphics": "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "processes_mps": "nvmlDeviceGetMPSComputeRunningProcesses_v3",
}
"""Per process list (its not-supported key and variant family): the C function of its v3 struct."""


class PynvmlCalls:
    """A device's process lists and samples through pynvml's wrappers (the simulator's way, and the
    fallback of :class:`DirectCalls`)."""

    __slots__ = ("nvml",)

    def __init__(self, nvml: NvmlCaller) -> None:
        self.nvml = nvml

    def process_list(self, scope: str, field: str, variants: Sequence[Variant], handle: Any) -> Any:
        """One process list (``field`` is its not-supported key and variant family), or ABSENT."""
        return self.nvml.call_first(scope, field, field, variants, handle)

    def memory_info(
        self, scope: str, handle: Any, variants: Sequence[Variant], fallback: frozenset[int]
    ) -> Any:
        """The device's memory info (v2, else v1: ``variants``, as :meth:`NvmlCaller.call_first`)."""
        return self.nvml.call_first(scope, MEMORY_INFO, MEMORY_INFO, variants, handle, fallback=fallback)

    def process_samples(self, scope: str, handle: Any, last_seen: int, answers: Mapping[int, Any]) -> Any:
        """``nvmlDeviceGetProcessUtilization(handle, last_seen)``, ``answers`` as for ``NvmlCaller.call``."""
        return self.nvml.call(scope, PROCESS_UTILIZATION, _SAMPLES_FN, handle, last_seen, answers=answers)


class DirectCalls(PynvmlCalls):
    """A device's process lists and samples through its own buffers (see the module docstring); one
    per device, kept across cycles (a MIG instance's lists use its GPU's buffers: each answer is
    unpacked before the next call)."""

    __slots__ = ("_lists", "_memory", "_samples")

    def __init__(self, nvml: NvmlCaller) -> None:
        super().__init__(nvml)
        self._memory: _MemoryBuffer | bool | None = True
        """The memory-info buffer; True: not looked for yet; None: pynvml's call (no v2 C function,
        or a code that sends the family to v1)."""
        self._lists: dict[str, _ListBuffer | None] = {}
        """Per list: its buffer; None: pynvml's call (no ``_v3`` C function, or a version mismatch)."""
        self._samples: _SampleBuffer | None = None

    def process_list(self, scope: str, field: str, variants: Sequence[Variant], handle: Any) -> Any:
        try:
            buffer = self._lists[field]
        except KeyError:
            buffer = self._lists[field] = self._list_buffer(field)
        nvml = self.nvml
        if buffer is None:
            return nvml.call_first(scope, field, field, variants, handle)
        if not nvml.supported(scope, field):
            return ABSENT
        ret, found = buffer.processes(handle)
        if ret == _SUCCESS:
            return found
        if ret in VARIANT_FALLBACK:
            self._lists[field] = None
            return nvml.call_first(scope, field, field, variants, handle)
        return nvml.code_failed(scope, field, buffer.fn_name, ret)

    def _list_buffer(self, field: str) -> _ListBuffer | None:
        functions = self.nvml.functions
        fn_name = _LIST_FN.get(field)
        fn = None if functions is None or fn_name is None else functions.get(fn_name)
        return None if fn is None or fn_name is None else _ListBuffer(fn, fn_name)

    def memory_info(
        self, scope: str, handle: Any, variants: Sequence[Variant], fallback: frozenset[int]
    ) -> Any:
        buffer = self._memory
        if buffer is True:
            functions = self.nvml.functions
            fn = None if functions is None else functions.get(_MEMORY_FN)
            buffer = self._memory = None if fn is None else _MemoryBuffer(fn)
        if not isinstance(buffer, _MemoryBuffer):
            return super().memory_info(scope, handle, variants, fallback)
        nvml = self.nvml
        if not nvml.supported(scope, MEMORY_INFO):
            return ABSENT
        ret = buffer.read(handle)
        if ret == _SUCCESS:
            return buffer.decoded()
        if ret in fallback:  # v1 from now on, as the pynvml-level probe decides it
            self._memory = None
            return super().memory_info(scope, handle, variants, fallback)
        return nvml.code_failed(scope, MEMORY_INFO, "nvmlDeviceGetMemoryInfo", ret)  # pynvml's name

    def process_samples(self, scope: str, handle: Any, last_seen: int, answers: Mapping[int, Any]) -> Any:
        nvml = self.nvml
        buffer = self._samples
        if buffer is None:
            fn = None if nvml.functions is None else nvml.functions.get(_SAMPLES_FN)
            if fn is None:
                return super().process_samples(scope, handle, last_seen, answers)
            buffer = self._samples = _SampleBuffer(fn)
        if not nvml.supported(scope, PROCESS_UTILIZATION):
            return ABSENT
        ret, samples = buffer.samples(handle, last_seen)
        if ret == _SUCCESS:
            return samples
        return nvml.code_failed(scope, PROCESS_UTILIZATION, _SAMPLES_FN, ret, answers)


def device_calls(nvml: NvmlCaller) -> PynvmlCalls:
    """A new device's calls: :class:`DirectCalls` where the library's C functions can be called
    (:attr:`NvmlCaller.functions`, the real pynvml) and the layouts match, else :class:`PynvmlCalls`."""
    return DirectCalls(nvml) if nvml.functions is not None and USABLE else PynvmlCalls(nvml)
