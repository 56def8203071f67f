"""The fast path's return codes and buffers (:mod:`falcon_gpu.sources.nvml.direct`), without a library.

The C functions are ctypes callbacks with NVML's signatures (so ctypes marshals the buffers as it
does for the real library), wired in through :class:`CFunctions`; the fallback calls go to the
simulator. The real library's answers are compared in ``tests/real_nvml/test_fast_calls.py``."""

from __future__ import annotations

import ctypes
from typing import Any

import pynvml
import pytest

from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.sources.nvml.calls import ABSENT, DeviceGone, NvmlCaller
from falcon_gpu.sources.nvml.direct import FIRST_CAPACITY, DirectCalls, ProcessInfo
from falcon_gpu.sources.nvml.field_values import ENERGY, MEMORY_TEMP, FieldGroup, FieldValues
from falcon_gpu.sources.nvml.library import CFunctions, c_functions
from falcon_gpu.sources.nvml.readers.memory import MEMORY_FALLBACK, memory_variants
from falcon_gpu.sources.nvml.readers.processes import _VARIANTS
from tests.nvml.helpers import GIB, gpu, scenario_of

LIST_FN = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.py_object,
    ctypes.POINTER(ctypes.c_uint),
    ctypes.POINTER(pynvml.c_nvmlProcessInfo_v3_t),
)
SAMPLES_FN = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.py_object,
    ctypes.POINTER(pynvml.c_nvmlProcessUtilizationSample_t),
    ctypes.POINTER(ctypes.c_uint),
    ctypes.c_ulonglong,
)
MEMORY_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(pynvml.c_nvmlMemory_v2_t))
FIELDS_FN = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.py_object, ctypes.c_int, ctypes.POINTER(pynvml.c_nvmlFieldValue_t)
)


class Driver:
    """What the callbacks answer, and how often they were called."""

    def __init__(self, processes: int = 3, code: int = pynvml.NVML_SUCCESS, truncate: bool = False) -> None:
        self.processes = processes
        self.code = code
        self.truncate = truncate
        """Fill what fits and answer SUCCESS (where nvml.h documents INSUFFICIENT_SIZE for NULL only)."""
        self.calls: dict[str, int] = {}
        self.functions = {
            "nvmlDeviceGetComputeRunningProcesses_v3": LIST_FN(self._list),
            "nvmlDeviceGetProcessUtilization": SAMPLES_FN(self._samples),
            "nvmlDeviceGetFieldValues": FIELDS_FN(self._fields),
            "nvmlDeviceGetMemoryInfo_v2": MEMORY_FN(self._memory),
        }

    def pointer(self, name: str) -> Any:
        if name not in self.functions:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return self.functions[name]

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _list(self, handle: Any, count: Any, infos: Any) -> int:
        self._count("list")
        if self.code != pynvml.NVML_SUCCESS:
            return self.code
        if count[0] < self.processes and not self.truncate:
            count[0] = self.processes
            return int(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
        for i in range(min(count[0], self.processes)):
            infos[i].pid, infos[i].usedGpuMemory = 100 + i, (1 << 20) * i
            infos[i].gpuInstanceId = infos[i].computeInstanceId = 0xFFFFFFFF
        infos[1].usedGpuMemory = 0xFFFFFFFFFFFFFFFF  # WDDM's "not available"
        count[0] = min(count[0], self.processes)
        return int(pynvml.NVML_SUCCESS)

    def _samples(self, handle: Any, samples: Any, count: Any, last_seen: int) -> int:
        self._count("samples")
        if self.code != pynvml.NVML_SUCCESS:
            return self.code
        if count[0] < self.processes:
            count[0] = self.processes
            return int(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
        for i in range(self.processes):
            samples[i].pid, samples[i].timeStamp, samples[i].smUtil = 100 + i, last_seen + 1, i
        count[0] = self.processes
        return int(pynvml.NVML_SUCCESS)

    def _memory(self, handle: Any, info: Any) -> int:
        self._count("memory")
        if self.code != pynvml.NVML_SUCCESS:
            return self.code
        assert info[0].version == pynvml.nvmlMemory_v2 and info[0].used == 0  # reset, version kept
        info[0].total, info[0].reserved, info[0].free, info[0].used = 80, 1, 60, 19
        return int(pynvml.NVML_SUCCESS)

    def _fields(self, handle: Any, count: int, values: Any) -> int:
        self._count("fields")
        if self.code != pynvml.NVML_SUCCESS:
            return self.code
        for i in range(count):
            assert values[i].nvmlReturn == 0 and values[i].value.ullVal == 0  # reset before each call
            values[i].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            values[i].value.ullVal = 1000 + values[i].fieldId
        return int(pynvml.NVML_SUCCESS)


def _caller(driver: Driver) -> NvmlCaller:
    nvml = NvmlCaller(
        SimulatedNvml(
            scenario_of(
                gpu(
                    "GPU-a",
                    processes=[{"pid": 7, "used_memory_bytes": 1024}],
                    memory_total_bytes=GIB,
                    memory_used_bytes=1024,
                )
            )
        )
    )
    nvml.lib.nvmlInit()
    assert nvml.functions is None  # the simulator: pynvml-level calls
    nvml.functions = CFunctions(driver.pointer)
    return nvml


def test_the_seam_is_the_real_pynvml_module_only() -> None:
    assert c_functions(pynvml) is not None
    assert c_functions(SimulatedNvml(scenario_of(gpu("GPU-a")))) is None


def test_a_list_longer_than_the_buffer_grows_it_once_then_takes_one_call() -> None:
    driver = Driver(processes=FIRST_CAPACITY * 3)
    calls = DirectCalls(_caller(driver))
    first = calls.process_list("GPU-a", "processes_compute", _VARIANTS["compute"], None)
    assert [p.pid for p in first] == [100 + i for i in range(FIRST_CAPACITY * 3)]
    assert first[0] == ProcessInfo(100, 0, 0xFFFFFFFF, 0xFFFFFFFF)
    assert first[1].usedGpuMemory is None  # as pynvml answers "not available"
    assert driver.calls["list"] == 2  # too small: INSUFFICIENT_SIZE with the count, grown, asked again
    assert calls.process_list("GPU-a", "processes_compute", _VARIANTS["compute"], None) == first
    assert driver.calls["list"] == 3


@pytest.mark.parametrize("kind", ["list", "samples"])
def test_each_return_code_means_what_pynvmls_exception_means(kind: str) -> None:
    def ask(calls: DirectCalls) -> Any:
        if kind == "list":
            return calls.process_list("GPU-a", "processes_compute", _VARIANTS["compute"], None)
        return calls.process_samples("GPU-a", None, 0, {pynvml.NVML_ERROR_NOT_FOUND: ()})

    driver = Driver(code=pynvml.NVML_ERROR_NOT_SUPPORTED)
    nvml = _caller(driver)
    calls = DirectCalls(nvml)
    assert ask(calls) is ABSENT
    assert ask(calls) is ABSENT and driver.calls[kind] == 1  # remembered: not asked again

    driver = Driver(code=pynvml.NVML_ERROR_UNKNOWN)
    nvml = _caller(driver)
    assert ask(DirectCalls(nvml)) is ABSENT
    assert nvml.errors and "NVML_ERROR code 999" in nvml.errors[0]

    driver = Driver(code=pynvml.NVML_ERROR_GPU_IS_LOST)
    with pytest.raises(DeviceGone):
        ask(DirectCalls(_caller(driver)))

    if kind == "samples":  # no new samples: the caller's answer for the code
        assert ask(DirectCalls(_caller(Driver(code=pynvml.NVML_ERROR_NOT_FOUND)))) == ()
        samples = ask(DirectCalls(_caller(Driver(processes=FIRST_CAPACITY + 1))))
        assert [(s.pid, s.smUtil) for s in samples] == [(100 + i, i) for i in range(FIRST_CAPACITY + 1)]


def test_a_version_mismatch_or_a_missing_function_takes_pynvmls_call_from_then_on() -> None:
    driver = Driver(code=pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    nvml = _caller(driver)
    handle = nvml.lib.nvmlDeviceGetHandleByIndex(0)
    calls = DirectCalls(nvml)
    got = calls.process_list("GPU-a", "processes_compute", _VARIANTS["compute"], handle)
    assert [p.pid for p in got] == [7]  # the simulator's answer
    calls.process_list("GPU-a", "processes_compute", _VARIANTS["compute"], handle)
    assert driver.calls["list"] == 1
    # no graphics list in the library: pynvml's (here the simulator's) call, no error
    assert calls.process_list("GPU-a", "processes_graphics", _VARIANTS["graphics"], handle) is not ABSENT
    assert nvml.errors == []


def test_field_values_reset_the_kept_array_and_honour_the_calls_code() -> None:
    driver = Driver()
    nvml = _caller(driver)
    values = FieldValues(nvml, (MEMORY_TEMP, ENERGY))
    both = FieldGroup((MEMORY_TEMP, ENERGY))
    for _ in range(2):  # the driver checks that each call finds the array reset
        batch = values.batch("GPU-a", None)
        assert batch.values(both) == (1000 + MEMORY_TEMP.field_id, 1000 + ENERGY.field_id)
    assert driver.calls["fields"] == 2

    driver.code = pynvml.NVML_ERROR_NOT_SUPPORTED  # the whole call: every reading by its own function
    assert values.batch("GPU-a", None).values(both)[0] is None  # no function has it: none
    driver.code = pynvml.NVML_ERROR_GPU_IS_LOST
    with pytest.raises(DeviceGone):
        FieldValues(nvml, (MEMORY_TEMP,)).batch("GPU-b", None).values(FieldGroup((MEMORY_TEMP,)))


def test_memory_info_v2_through_its_kept_struct_and_v1_through_pynvml_where_v2_is_refused() -> None:
    driver = Driver()
    nvml = _caller(driver)
    handle = nvml.lib.nvmlDeviceGetHandleByIndex(0)
    calls = DirectCalls(nvml)
    variants = memory_variants(nvml.lib)  # built once, as the source does: the chosen one is kept by it
    for _ in range(2):
        info = calls.memory_info("GPU-a", handle, variants, MEMORY_FALLBACK)
        assert (info.total, info.reserved, info.free, info.used) == (80, 1, 60, 19)
    driver.code = pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH  # an old driver: v2 refused
    info = calls.memory_info("GPU-a", handle, variants, MEMORY_FALLBACK)
    assert info.total == nvml.lib.nvmlDeviceGetMemoryInfo(handle).total  # the simulator's, by pynvml's call
    calls.memory_info("GPU-a", handle, variants, MEMORY_FALLBACK)
    assert driver.calls["memory"] == 3  # not asked again


def test_a_driver_that_fills_what_fits_is_asked_again_with_a_larger_buffer() -> None:
    driver = Driver(processes=FIRST_CAPACITY * 3, truncate=True)
    calls = DirectCalls(_caller(driver))
    found = calls.process_list("GPU-a", "processes_compute", _VARIANTS["compute"], None)
    assert len(found) == FIRST_CAPACITY * 3
    assert driver.calls["list"] == 3  # 16 (full), 37 (full), 79 (not full)
