"""SimulatedNvml behaves like the pynvml module: names, constants, errors, cycles, MIG, events."""

from __future__ import annotations

import contextlib
import ctypes
import inspect
import threading
import time

import pynvml
import pytest

from falcon_gpu.simulator.nvml.device import FIELD_VALUE_LAYOUT
from falcon_gpu.simulator.nvml.gpm import METRICS_GET_HEAD
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.simulator.scenario.parse import load_scenario, parse_scenario, resolve_scenario
from falcon_gpu.sources.nvml.library import load_nvml

GIB = 1 << 30


def sim_of(*gpus: dict[str, object], clock: float | None = None) -> SimulatedNvml:
    scenario = parse_scenario({"gpus": list(gpus)})
    sim = SimulatedNvml(scenario) if clock is None else SimulatedNvml(scenario, clock=lambda: clock)
    sim.nvmlInit()
    return sim


def gpu(uuid: str = "GPU-a", **extra: object) -> dict[str, object]:
    out: dict[str, object] = {"uuid": uuid, "name": "NVIDIA A100-SXM4-40GB", "pci_bus_id": "00000000:07:00.0"}
    out.update(extra)
    return out


def code_of(fn: object, *args: object) -> int:
    with pytest.raises(pynvml.NVMLError) as info:
        fn(*args)  # type: ignore[operator]
    return int(info.value.value)


def test_load_nvml_picks_module_or_simulator() -> None:
    assert load_nvml(None) is pynvml
    sim = load_nvml(load_scenario(resolve_scenario("default")))
    assert isinstance(sim, SimulatedNvml)


def test_constants_and_error_classes_are_pynvmls_but_not_its_functions() -> None:
    sim = sim_of(gpu())
    assert sim.NVML_ERROR_GPU_IS_LOST == pynvml.NVML_ERROR_GPU_IS_LOST
    assert sim.nvmlMemory_v2 == pynvml.nvmlMemory_v2
    assert sim.nvmlEventTypeXidCriticalError == pynvml.nvmlEventTypeXidCriticalError
    assert sim.NVML_FI_DEV_MEMORY_TEMP == pynvml.NVML_FI_DEV_MEMORY_TEMP
    assert sim.NVMLError is pynvml.NVMLError and sim.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost
    assert not hasattr(sim, "nvmlDeviceGetBAR1MemoryInfo")  # unimplemented = missing, like an old binding
    assert not hasattr(sim, "NVML_NO_SUCH_CONSTANT") and not hasattr(sim, "NVMLError_NoSuchError")


def test_calls_need_init_and_init_can_be_made_to_fail() -> None:
    sim = SimulatedNvml(parse_scenario({"gpus": [gpu()]}))
    assert code_of(sim.nvmlDeviceGetCount) == pynvml.NVML_ERROR_UNINITIALIZED
    sim.fail_init_times = 2
    sim.init_error = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        sim.nvmlInit()
    assert code_of(sim.nvmlInit) == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    sim.nvmlInit()
    assert sim.nvmlDeviceGetCount() == 1
    sim.nvmlInit()
    sim.nvmlShutdown()
    assert sim.nvmlDeviceGetCount() == 1  # still one reference
    sim.nvmlShutdown()
    assert code_of(sim.nvmlDeviceGetCount) == pynvml.NVML_ERROR_UNINITIALIZED


def test_each_device_count_starts_a_cycle_and_lists_advance() -> None:
    sim = sim_of(
        gpu(
            memory_total_bytes=10 * GIB,
            memory_used_bytes=[1 * GIB, 2 * GIB, 3 * GIB],
            memory_reserved_bytes=GIB // 2,
            power_watts=[100.5, 200.25],
            energy_joules=[10.5, 20],
        )
    )
    assert sim.cycle == 0
    seen = []
    for _ in range(4):
        sim.nvmlDeviceGetCount()
        h = sim.nvmlDeviceGetHandleByIndex(0)
        seen.append(
            (
                sim.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2).used,
                sim.nvmlDeviceGetPowerUsage(h),
                sim.nvmlDeviceGetTotalEnergyConsumption(h),
            )
        )
    assert seen == [
        (GIB, 100500, 10500),
        (2 * GIB, 200250, 20000),
        (3 * GIB, 200250, 20000),
        (3 * GIB, 200250, 20000),
    ]
    assert sim.calls["nvmlDeviceGetCount"] == 4


def test_memory_v1_counts_reserved_as_used_and_v2_separates_it() -> None:
    sim = sim_of(gpu(memory_total_bytes=10 * GIB, memory_used_bytes=GIB, memory_reserved_bytes=GIB // 2))
    h = sim.nvmlDeviceGetHandleByIndex(0)
    v2 = sim.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    assert (v2.total, v2.used, v2.reserved, v2.free, v2.version) == (
        10 * GIB,
        GIB,
        GIB // 2,
        10 * GIB - GIB - GIB // 2,
        pynvml.nvmlMemory_v2,
    )
    v1 = sim.nvmlDeviceGetMemoryInfo(h)
    assert (v1.total, v1.used, v1.free) == (10 * GIB, GIB + GIB // 2, 10 * GIB - GIB - GIB // 2)
    assert not hasattr(v1, "reserved")
    assert code_of(sim.nvmlDeviceGetMemoryInfo, h, 0x01000018) == pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH


def test_missing_or_listed_keys_answer_not_supported() -> None:
    sim = sim_of(gpu(fan_speed_percent=30, power_watts=5, not_supported=["fan_speed_percent"]))
    h = sim.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        sim.nvmlDeviceGetFanSpeed(h)
    assert (
        code_of(sim.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU)
        == pynvml.NVML_ERROR_NOT_SUPPORTED
    )
    assert code_of(sim.nvmlDeviceGetTotalEccErrors, h, 0, 0) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert sim.nvmlDeviceGetPowerUsage(h) == 5000
    fields = sim.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_MEMORY_TEMP])
    assert fields[0].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED  # the call succeeds, the value does not


def test_field_values_and_health_readings() -> None:
    sim = sim_of(
        gpu(
            memory_temperature_celsius=71,
            clock_event_reasons=["idle", "hw_thermal"],
            retired_pages={"single_bit": 2, "double_bit": 1, "pending": True},
            remapped_rows={"correctable": 3, "uncorrectable": 1, "pending": True, "failed": False},
            inforom_valid=False,
        )
    )
    h = sim.nvmlDeviceGetHandleByIndex(0)
    (value,) = sim.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_MEMORY_TEMP])
    assert (value.nvmlReturn, value.valueType, value.value.uiVal) == (
        0,
        pynvml.NVML_VALUE_TYPE_UNSIGNED_INT,
        71,
    )
    mask = pynvml.nvmlClocksEventReasonGpuIdle | pynvml.nvmlClocksEventReasonHwThermalSlowdown
    assert sim.nvmlDeviceGetCurrentClocksEventReasons(h) == mask
    assert sim.nvmlDeviceGetCurrentClocksThrottleReasons(h) == mask
    assert (
        len(
            sim.nvmlDeviceGetRetiredPages(h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
        )
        == 2
    )
    assert len(sim.nvmlDeviceGetRetiredPages(h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)) == 1
    assert sim.nvmlDeviceGetRetiredPagesPendingStatus(h) == 1
    assert sim.nvmlDeviceGetRemappedRows(h) == (3, 1, 1, 0)
    with pytest.raises(pynvml.NVMLError_CorruptedInforom):
        sim.nvmlDeviceValidateInforom(h)


def test_lost_gpu_answers_gpu_is_lost_from_its_cycle() -> None:
    sim = sim_of(gpu(power_watts=1, lost_at_cycle=1), gpu("GPU-b", power_watts=2))
    sim.nvmlDeviceGetCount()
    h0, h1 = sim.nvmlDeviceGetHandleByIndex(0), sim.nvmlDeviceGetHandleByIndex(1)
    assert sim.nvmlDeviceGetPowerUsage(h0) == 1000
    sim.nvmlDeviceGetCount()
    for fn in (
        sim.nvmlDeviceGetPowerUsage,
        sim.nvmlDeviceGetFanSpeed,
        sim.nvmlDeviceGetComputeRunningProcesses,
    ):
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            fn(h0)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        sim.nvmlDeviceGetTemperature(h0, pynvml.NVML_TEMPERATURE_GPU)
    # identity is still served, so the lost GPU can be named
    assert sim.nvmlDeviceGetHandleByIndex(0) is h0
    assert (sim.nvmlDeviceGetUUID(h0), sim.nvmlDeviceGetPciInfo(h0).busId) == ("GPU-a", "00000000:07:00.0")
    assert sim.nvmlDeviceGetPowerUsage(h1) == 2000


def test_mig_slots_handles_and_processes() -> None:
    sim = load_nvml(load_scenario(resolve_scenario("mig-node")))
    sim.nvmlInit()
    sim.nvmlDeviceGetCount()
    parent = sim.nvmlDeviceGetHandleByIndex(0)
    assert sim.nvmlDeviceGetMigMode(parent) == [1, 1]
    assert sim.nvmlDeviceGetMaxMigDeviceCount(parent) == 7
    handles = []
    for slot in range(7):
        with contextlib.suppress(pynvml.NVMLError_NotFound):
            handles.append(sim.nvmlDeviceGetMigDeviceHandleByIndex(parent, slot))
    assert len(handles) == 4
    assert code_of(sim.nvmlDeviceGetMigDeviceHandleByIndex, parent, 7) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    first = handles[0]
    assert sim.nvmlDeviceGetName(first) == "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
    assert sim.nvmlDeviceGetUUID(first).startswith("MIG-")
    assert (sim.nvmlDeviceGetGpuInstanceId(first), sim.nvmlDeviceGetComputeInstanceId(first)) == (9, 0)
    assert sim.nvmlDeviceIsMigDeviceHandle(first) == 1
    assert sim.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(first) is parent
    (proc,) = sim.nvmlDeviceGetComputeRunningProcesses_v3(first)
    assert (proc.pid, proc.gpuInstanceId, proc.computeInstanceId) == (7001, 9, 0)
    on_parent = sim.nvmlDeviceGetComputeRunningProcesses_v3(parent)
    assert {(p.pid, p.gpuInstanceId) for p in on_parent} == {(7001, 9), (7002, 10), (7003, 5)}
    assert code_of(sim.nvmlDeviceGetUtilizationRates, first) == pynvml.NVML_ERROR_NOT_SUPPORTED
    other = sim.nvmlDeviceGetHandleByIndex(1)
    assert sim.nvmlDeviceGetMigMode(other) == [0, 0]
    info = sim.nvmlGpuInstanceGetInfo(sim.nvmlDeviceGetGpuInstanceById(parent, 10))
    assert (info.id, info.profileId, info.placement.start, info.placement.size) == (
        10,
        pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE,
        3,
        1,
    )
    assert code_of(sim.nvmlDeviceGetGpuInstanceById, parent, 2) == pynvml.NVML_ERROR_NOT_FOUND
    assert code_of(sim.nvmlDeviceGetGpuInstanceById, other, 0) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert code_of(sim.nvmlGpuInstanceGetInfo, first) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_process_lists_by_type_and_utilisation_samples_since_last_seen() -> None:
    now = [1000.0]
    scenario = parse_scenario(
        {
            "gpus": [
                gpu(
                    processes=[
                        {
                            "pid": 1,
                            "name": "a",
                            "type": "compute",
                            "used_memory_bytes": 10,
                            "sm_util_percent": [50, 70],
                        },
                        {"pid": 2, "name": "b", "type": ["graphics", "mps"], "used_memory_bytes": 20},
                    ]
                )
            ]
        }
    )
    sim = SimulatedNvml(scenario, clock=lambda: now[0])
    sim.nvmlInit()
    sim.nvmlDeviceGetCount()
    h = sim.nvmlDeviceGetHandleByIndex(0)
    assert [p.pid for p in sim.nvmlDeviceGetComputeRunningProcesses(h)] == [1]
    assert [p.pid for p in sim.nvmlDeviceGetGraphicsRunningProcesses_v2(h)] == [2]
    assert [p.pid for p in sim.nvmlDeviceGetMPSComputeRunningProcesses_v3(h)] == [2]
    assert sim.nvmlDeviceGetComputeRunningProcesses(h)[0].gpuInstanceId == 0xFFFFFFFF
    (sample,) = sim.nvmlDeviceGetProcessUtilization(h, 0)
    assert (sample.pid, sample.smUtil, sample.timeStamp) == (1, 50, 1_000_000_000)
    with pytest.raises(pynvml.NVMLError_NotFound):
        sim.nvmlDeviceGetProcessUtilization(h, sample.timeStamp)
    now[0] = 1030.0
    sim.nvmlDeviceGetCount()
    (newer,) = sim.nvmlDeviceGetProcessUtilization(h, sample.timeStamp)
    assert (newer.smUtil, newer.timeStamp) == (70, 1_030_000_000)
    assert len(sim.nvmlDeviceGetProcessUtilization(h, 0)) == 2
    assert sim.nvmlSystemGetProcessName(2) == "b"
    assert code_of(sim.nvmlSystemGetProcessName, 3) == pynvml.NVML_ERROR_NOT_FOUND


def test_xid_events_are_delivered_once_per_set_when_their_cycle_comes() -> None:
    sim = sim_of(gpu(xid_events=[{"cycle": 1, "xid": 79}, {"cycle": 0, "xid": 48}]), gpu("GPU-b"))
    event_set = sim.nvmlEventSetCreate()
    other_set = sim.nvmlEventSetCreate()
    for i in range(2):
        h = sim.nvmlDeviceGetHandleByIndex(i)
        sim.nvmlDeviceRegisterEvents(h, pynvml.nvmlEventTypeXidCriticalError, event_set)
    assert code_of(sim.nvmlEventSetWait, event_set, 0) == pynvml.NVML_ERROR_TIMEOUT  # no cycle yet
    sim.nvmlDeviceGetCount()
    event = sim.nvmlEventSetWait(event_set, 0)
    assert (event.eventData, event.eventType) == (48, pynvml.nvmlEventTypeXidCriticalError)
    assert sim.nvmlDeviceGetUUID(event.device) == "GPU-a"
    assert code_of(sim.nvmlEventSetWait, event_set, 0) == pynvml.NVML_ERROR_TIMEOUT
    assert (
        code_of(sim.nvmlEventSetWait, other_set, 0) == pynvml.NVML_ERROR_TIMEOUT
    )  # nothing registered there
    sim.nvmlDeviceGetCount()
    assert sim.nvmlEventSetWait(event_set, 1000).eventData == 79
    assert code_of(sim.nvmlEventSetWait, event_set, 10) == pynvml.NVML_ERROR_TIMEOUT
    sim.nvmlEventSetFree(event_set)
    assert code_of(sim.nvmlEventSetWait, event_set, 0) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_a_waiting_thread_wakes_when_the_cycle_comes() -> None:
    sim = sim_of(gpu(xid_events=[{"cycle": 1, "xid": 31}]))
    sim.nvmlDeviceGetCount()
    event_set = sim.nvmlEventSetCreate()
    sim.nvmlDeviceRegisterEvents(
        sim.nvmlDeviceGetHandleByIndex(0), pynvml.nvmlEventTypeXidCriticalError, event_set
    )
    got: list[int] = []

    def wait() -> None:
        for _ in range(200):
            try:
                got.append(sim.nvmlEventSetWait(event_set, 1000).eventData)
                return
            except pynvml.NVMLError_Timeout:
                continue

    thread = threading.Thread(target=wait)
    thread.start()
    sim.nvmlDeviceGetCount()
    thread.join(timeout=10)
    assert got == [31]


def test_every_simulated_function_is_a_real_pynvml_function_with_its_arity() -> None:
    """The source reaches NVML by name: a name or argument count that only the simulator
    knows would pass every test here and answer "not available" on a GPU node, silently."""
    offered = [n for n in dir(SimulatedNvml) if n.startswith("nvml") and callable(getattr(SimulatedNvml, n))]
    assert "nvmlDeviceGetCount" in offered
    for name in offered:
        assert hasattr(pynvml, name), name
        ours = list(inspect.signature(getattr(SimulatedNvml, name)).parameters)[1:]  # without self
        theirs = list(inspect.signature(getattr(pynvml, name)).parameters)
        assert len(ours) == len(theirs), (name, ours, theirs)


def test_field_values_are_pynvml_structs_with_a_return_code_each() -> None:
    sim = sim_of(
        gpu(
            energy_joules=12.5,
            power_watts=250,
            pcie_replays=4,
            ecc={"corrected_volatile": 3, "uncorrected_aggregate": 1},
            remapped_rows={"correctable": 5, "uncorrectable": 0, "pending": False, "failed": True},
        )
    )
    h = sim.nvmlDeviceGetHandleByIndex(0)
    ids = [
        pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
        (pynvml.NVML_FI_DEV_POWER_INSTANT, 0),
        pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER,
        pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL,
        pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL,
        pynvml.NVML_FI_DEV_REMAPPED_FAILURE,
        pynvml.NVML_FI_DEV_RETIRED_SBE,
        pynvml.NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT,
    ]
    values = sim.nvmlDeviceGetFieldValues(h, ids)
    assert isinstance(values[0], pynvml.c_nvmlFieldValue_t) and len(values) == len(ids)
    got = [
        (v.fieldId, v.nvmlReturn, v.value.ullVal if v.valueType == pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
         else v.value.uiVal)
        for v in values
    ]  # fmt: skip
    ns = pynvml.NVML_ERROR_NOT_SUPPORTED
    assert got == [
        (pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 0, 12500),
        (pynvml.NVML_FI_DEV_POWER_INSTANT, 0, 250_000),
        (pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER, 0, 4),
        (pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL, 0, 3),
        (pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL, ns, 0),  # the scenario has no such counter
        (pynvml.NVML_FI_DEV_REMAPPED_FAILURE, 0, 1),
        (pynvml.NVML_FI_DEV_RETIRED_SBE, ns, 0),
        (pynvml.NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT, ns, 0),  # an ID the simulator does not serve
    ]


def test_event_wait_blocks_for_its_timeout_and_wakes_on_the_next_event() -> None:
    sim = sim_of(gpu(xid_events=[{"cycle": 1, "xid": 79}]))
    sim.nvmlDeviceGetCount()  # cycle 0: the event is not due yet
    event_set = sim.nvmlEventSetCreate()
    sim.nvmlDeviceRegisterEvents(
        sim.nvmlDeviceGetHandleByIndex(0), pynvml.nvmlEventTypeXidCriticalError, event_set
    )
    started = time.monotonic()
    assert code_of(sim.nvmlEventSetWait, event_set, 300) == pynvml.NVML_ERROR_TIMEOUT
    assert time.monotonic() - started >= 0.29  # the whole timeout, not 50 ms slices
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(sim.nvmlEventSetWait(event_set, 10_000).eventData))
    started = time.monotonic()
    waiter.start()
    time.sleep(0.05)
    sim.nvmlDeviceGetCount()  # cycle 1: the XID becomes due and wakes the waiter
    waiter.join(5)
    assert got == [79] and time.monotonic() - started < 2


def test_the_packed_field_value_layout_is_the_ctypes_struct() -> None:
    struct_type = pynvml.c_nvmlFieldValue_t
    assert FIELD_VALUE_LAYOUT.size == ctypes.sizeof(struct_type)
    offsets = [getattr(struct_type, name).offset for name, _ in struct_type._fields_]
    assert offsets == [0, 4, 8, 16, 24, 28, 32]


def test_the_gpm_request_head_is_the_ctypes_struct() -> None:
    get = pynvml.c_nvmlGpmMetricsGet_t
    offsets = [getattr(get, name).offset for name in ("version", "numMetrics", "sample1", "sample2")]
    assert offsets == [0, 4, 8, 16] and METRICS_GET_HEAD.size == get.metrics.offset


def test_gpm_metrics_are_written_into_the_callers_struct_one_return_code_each() -> None:
    sim = sim_of(gpu(gpm={"sm_active_percent": [50, 70, 90], "dram_active_percent": 20}))
    h = sim.nvmlDeviceGetHandleByIndex(0)
    older, newer = sim.nvmlGpmSampleAlloc(), sim.nvmlGpmSampleAlloc()
    sim.nvmlDeviceGetCount()
    sim.nvmlGpmSampleGet(h, older)
    sim.nvmlDeviceGetCount()
    sim.nvmlDeviceGetCount()
    sim.nvmlGpmSampleGet(h, newer)  # cycles 1 and 2 since the older one: (70 + 90) / 2
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version, request.numMetrics = pynvml.NVML_GPM_METRICS_GET_VERSION, 3
    request.sample1, request.sample2 = older, newer
    ids = (
        pynvml.NVML_GPM_METRIC_SM_UTIL,
        pynvml.NVML_GPM_METRIC_FP64_UTIL,
        pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
    )
    for i, metric_id in enumerate(ids):
        request.metrics[i].metricId, request.metrics[i].value = metric_id, -1.0
    assert sim.nvmlGpmMetricsGet(request) is request
    answers = [(request.metrics[i].nvmlReturn, request.metrics[i].value) for i in range(3)]
    assert answers == [
        (pynvml.NVML_SUCCESS, 80.0),
        (pynvml.NVML_ERROR_NOT_SUPPORTED, -1.0),
        (pynvml.NVML_SUCCESS, 20.0),
    ]
    request.sample2 = pynvml.c_nvmlGpmSample_t()  # NULL
    assert code_of(sim.nvmlGpmMetricsGet, request) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    request.version = 0
    assert code_of(sim.nvmlGpmMetricsGet, request) == pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    sim.nvmlGpmSampleFree(older)
    assert code_of(sim.nvmlGpmSampleFree, older) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert sim.gpm_samples == 1


def test_a_process_runs_from_its_from_cycle_up_to_not_including_its_until_cycle() -> None:
    now = [1000.0]
    procs = [
        {"pid": 1, "name": "early", "used_memory_bytes": 10, "sm_util_percent": 40, "until_cycle": 2},
        {"pid": 2, "name": "late", "used_memory_bytes": 20, "sm_util_percent": 60, "from_cycle": 1},
    ]
    scenario = parse_scenario({"gpus": [gpu(processes=procs), gpu("GPU-m", mig=[mig_with(procs)])]})
    sim = SimulatedNvml(scenario, clock=lambda: now[0])
    sim.nvmlInit()
    seen = []
    for cycle in range(4):
        now[0] = 1000.0 + cycle
        sim.nvmlDeviceGetCount()
        h = sim.nvmlDeviceGetHandleByIndex(0)
        mig = sim.nvmlDeviceGetMigDeviceHandleByIndex(sim.nvmlDeviceGetHandleByIndex(1), 0)
        listed = [p.pid for p in sim.nvmlDeviceGetComputeRunningProcesses_v3(h)]
        assert [p.pid for p in sim.nvmlDeviceGetComputeRunningProcesses_v3(mig)] == listed
        sampled = {s.pid for s in sim.nvmlDeviceGetProcessUtilization(h, int(now[0] * 1e6) - 1)}
        assert sampled == set(listed), cycle
        named = [pid for pid in (1, 2) if pid in listed and sim.nvmlSystemGetProcessName(pid)]
        assert named == listed
        seen.append(listed)
    assert seen == [[1], [1, 2], [2], [2]]
    assert code_of(sim.nvmlSystemGetProcessName, 1) == pynvml.NVML_ERROR_NOT_FOUND, "gone: no name"


def mig_with(processes: list[dict[str, object]]) -> dict[str, object]:
    return {"gpu_instance_id": 1, "profile": "1g.10gb", "uuid": "MIG-1", "processes": processes}


def test_mig_instances_exist_from_their_from_cycle_up_to_their_until_cycle_and_only_while_mig_is_on() -> None:
    instances = [
        {"gpu_instance_id": 1, "profile": "1g.10gb", "uuid": "MIG-1", "memory_total_bytes": GIB,
         "memory_used_bytes": 1, "until_cycle": 2},
        {"gpu_instance_id": 2, "profile": "1g.10gb", "uuid": "MIG-2", "memory_total_bytes": GIB,
         "memory_used_bytes": 2, "from_cycle": 1},
    ]  # fmt: skip
    sim = sim_of(
        gpu(mig=instances, mig_mode=[1, 1, 1, 0, 1], utilization_gpu_percent=30, utilization_memory_percent=5)
    )
    seen, modes, kept = [], [], None
    for cycle in range(5):
        sim.nvmlDeviceGetCount()
        h = sim.nvmlDeviceGetHandleByIndex(0)
        modes.append(sim.nvmlDeviceGetMigMode(h)[0])
        handles = []
        for slot in range(sim.nvmlDeviceGetMaxMigDeviceCount(h)):
            with contextlib.suppress(pynvml.NVMLError):
                handles.append(sim.nvmlDeviceGetMigDeviceHandleByIndex(h, slot))
        seen.append([sim.nvmlDeviceGetUUID(m) for m in handles])
        if cycle == 1:
            kept = handles[0]  # MIG-1's handle, kept past its destruction
        if cycle == 3:  # MIG off: no instance, GPU utilisation answered
            assert sim.nvmlDeviceGetUtilizationRates(h).gpu == 30
            assert (
                code_of(sim.nvmlDeviceGetMigDeviceHandleByIndex, h, 0) == pynvml.NVML_ERROR_INVALID_ARGUMENT
            )
            assert code_of(sim.nvmlDeviceGetGpuInstanceById, h, 2) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert seen == [["MIG-1"], ["MIG-1", "MIG-2"], ["MIG-2"], [], ["MIG-2"]]
    assert modes == [1, 1, 1, 0, 1]
    assert code_of(sim.nvmlDeviceGetMemoryInfo, kept) == pynvml.NVML_ERROR_NOT_FOUND  # a destroyed instance
    assert sim.nvmlDeviceGetMemoryInfo(sim.nvmlDeviceGetMigDeviceHandleByIndex(h, 0)).used == 2
