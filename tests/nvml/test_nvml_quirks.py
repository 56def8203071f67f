"""pynvml and driver quirks: versioned calls probed once, NOT_SUPPORTED remembered, and
unexpected errors confined to one reader."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from falcon_gpu.simulator.nvml.library import SimulatedNvml
from tests.nvml.helpers import GIB, Quirky, gpu, raising, scenario_of, source_on

PROCS = [
    {"pid": 11, "name": "trainer", "type": "compute", "used_memory_bytes": 3 * GIB, "sm_util_percent": 40},
    {"pid": 12, "name": "viz", "type": ["compute", "graphics"], "used_memory_bytes": GIB},
]


def sim_with_processes() -> SimulatedNvml:
    return SimulatedNvml(
        scenario_of(
            gpu(
                memory_total_bytes=40 * GIB,
                memory_used_bytes=5 * GIB,
                memory_reserved_bytes=GIB,
                processes=PROCS,
            )
        )
    )


def pids_and_memory(snapshot: Any) -> dict[int, tuple[int | None, tuple[str, ...]]]:
    return {p.pid: (p.used_memory_bytes, p.types) for p in snapshot.devices[0].processes}


WANT = {11: (3 * GIB, ("compute",)), 12: (GIB, ("compute", "graphics"))}


def test_v3_process_call_missing_attribute_falls_back_to_v2_once() -> None:
    sim = sim_with_processes()
    lib = Quirky(
        sim, hide=("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3")
    )
    source, telemetry = source_on(lib)
    for t in range(3):
        assert pids_and_memory(source.collect(1000.0 + t)) == WANT
    assert source.caller.chosen("processes_compute") == "v2"
    assert source.caller.chosen("processes_mps") == "v3"
    assert sim.calls["nvmlDeviceGetComputeRunningProcesses_v2"] == 3
    assert telemetry.view().errors_total == {}


def test_v3_function_not_found_falls_back_and_is_not_called_again() -> None:
    sim = sim_with_processes()
    not_found = raising(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    lib = Quirky(
        sim,
        hide=("nvmlDeviceGetComputeRunningProcesses_v2",),
        override={"nvmlDeviceGetComputeRunningProcesses_v3": not_found},
    )
    source, telemetry = source_on(lib)
    for t in range(3):
        assert pids_and_memory(source.collect(1000.0 + t)) == WANT
    assert lib.calls["nvmlDeviceGetComputeRunningProcesses_v3"] == 1
    assert source.caller.chosen("processes_compute") == "v1"
    assert sim.calls["nvmlDeviceGetComputeRunningProcesses"] == 3
    assert telemetry.view().errors_total == {}


def test_v1_process_struct_without_instance_ids() -> None:
    """Old bindings' v1 struct has only pid and usedGpuMemory (and None on WDDM)."""
    sim = sim_with_processes()

    def v1(handle: Any) -> list[Any]:
        return [SimpleNamespace(pid=11, usedGpuMemory=None), SimpleNamespace(pid=13, usedGpuMemory=2**64 - 1)]

    lib = Quirky(
        sim,
        hide=("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"),
        override={"nvmlDeviceGetComputeRunningProcesses": v1},
    )
    source, _ = source_on(lib)
    procs = {p.pid: p for p in source.collect(1000.0).devices[0].processes}
    assert procs[11].used_memory_bytes is None and procs[11].types == ("compute",)
    assert procs[13].used_memory_bytes is None
    assert procs[13].gpu_instance_id is None and procs[13].compute_instance_id is None
    assert procs[12].types == ("graphics",)


@pytest.mark.parametrize(
    "quirk",
    ["no_version_argument", "version_mismatch", "v2_not_supported", "no_v2_constant"],
)
def test_memory_info_v1_only(quirk: str) -> None:
    sim = sim_with_processes()
    v1_calls: list[int] = []

    def memory_v1_only(handle: Any, version: int | None = None) -> Any:
        if version:
            code = (
                pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
                if quirk == "version_mismatch"
                else pynvml.NVML_ERROR_NOT_SUPPORTED
            )
            raise pynvml.NVMLError(code)
        v1_calls.append(1)
        return sim.nvmlDeviceGetMemoryInfo(handle)

    def old_binding(handle: Any) -> Any:  # no ``version`` parameter at all
        v1_calls.append(1)
        return sim.nvmlDeviceGetMemoryInfo(handle)

    fn = old_binding if quirk == "no_version_argument" else memory_v1_only
    lib = Quirky(
        sim,
        hide=("nvmlMemory_v2",) if quirk == "no_v2_constant" else (),
        override={"nvmlDeviceGetMemoryInfo": fn},
    )
    source, telemetry = source_on(lib)
    for t in range(2):
        device = source.collect(1000.0 + t).devices[0]
        assert (device.memory_total_bytes, device.memory_used_bytes, device.memory_free_bytes) == (
            40 * GIB,
            6 * GIB,
            34 * GIB,
        )
        assert device.memory_reserved_bytes is None
    assert source.caller.chosen("memory_info") == "v1"
    assert lib.calls["nvmlDeviceGetMemoryInfo"] == (2 if quirk in ("no_v2_constant",) else 3)
    assert len(v1_calls) == 2
    assert telemetry.view().errors_total == {}


def test_memory_v2_is_used_when_available() -> None:
    source, _ = source_on(sim_with_processes())
    device = source.collect(1000.0).devices[0]
    assert (device.memory_used_bytes, device.memory_reserved_bytes, device.memory_free_bytes) == (
        5 * GIB,
        GIB,
        34 * GIB,
    )
    assert source.caller.chosen("memory_info") == "v2"


OPTIONAL_CALLS = (
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetEncoderUtilization",
    "nvmlDeviceGetDecoderUtilization",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetPerformanceState",
    "nvmlDeviceGetFanSpeed",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRetiredPages",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetPcieReplayCounter",
    "nvmlDeviceValidateInforom",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetProcessUtilization",
)


def test_not_supported_everywhere_is_none_asked_once_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sim = SimulatedNvml(
        scenario_of(gpu(not_supported=["inforom", "mig", "processes", "process_utilization"]))
    )
    lib = Quirky(sim, override={"nvmlDeviceGetFieldValues": raising(pynvml.NVML_ERROR_NOT_SUPPORTED)})
    source, telemetry = source_on(lib)
    with caplog.at_level(logging.INFO, logger="falcon_gpu"):
        device = source.collect(1000.0).devices[0]
        first = dict(sim.calls)
        for t in range(1, 4):
            again = source.collect(1000.0 + t).devices[0]
            assert again == device
    assert device.up
    for name in (
        "memory_total_bytes",
        "memory_used_bytes",
        "utilization_ratio",
        "temperature_celsius",
        "memory_temperature_celsius",
        "power_watts",
        "power_limit_watts",
        "energy_joules",
        "performance_state",
        "sm_clock_hertz",
        "memory_clock_hertz",
        "fan_speed_ratio",
        "encoder_utilization_ratio",
        "decoder_utilization_ratio",
        "pcie_replays",
        "ecc",
        "retired_pages",
        "remapped_rows",
        "clock_event_reasons",
        "inforom_valid",
    ):
        assert getattr(device, name) is None, name
    assert device.processes == () and device.mig == () and not device.mig_enabled
    for fn in OPTIONAL_CALLS:
        if fn != "nvmlDeviceGetFieldValues":
            assert sim.calls[fn] == first.get(fn, 0) and first.get(fn, 0) >= 1, fn
    assert lib.calls["nvmlDeviceGetFieldValues"] == 1
    assert sim.calls["nvmlDeviceGetCount"] == 4
    assert telemetry.view().errors_total == {}
    notes = [r.getMessage() for r in caplog.records if "does not support" in r.getMessage()]
    assert len(notes) == 1 and "fan_speed" in notes[0]  # one line for the GPU model, in the first cycle
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_field_value_not_supported_inside_a_successful_call() -> None:
    sim = SimulatedNvml(scenario_of(gpu(temperature_celsius=50)))
    source, telemetry = source_on(sim)
    for t in range(3):
        assert source.collect(1000.0 + t).devices[0].memory_temperature_celsius is None
    # the batch, and in the same cycle the per-link NVLink fields in place of the refused sums (this
    # GPU has no NVLink: refused too); then nothing is left to ask
    assert sim.calls["nvmlDeviceGetFieldValues"] == 2
    assert telemetry.view().errors_total == {}


def test_clock_event_reasons_fall_back_to_throttle_reasons() -> None:
    sim = SimulatedNvml(scenario_of(gpu(clock_event_reasons=["sw_thermal", "sync_boost"])))
    source, _ = source_on(Quirky(sim, hide=("nvmlDeviceGetCurrentClocksEventReasons",)))
    assert source.collect(1000.0).devices[0].clock_event_reasons == frozenset({"sw_thermal", "sync_boost"})
    assert source.caller.chosen("clock_event_reasons") == "throttle"


def test_unexpected_error_fails_one_reader_counted_every_cycle_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sim = SimulatedNvml(scenario_of(gpu(power_watts=100, power_limit_watts=300, temperature_celsius=40)))
    broken = {"nvmlDeviceGetTemperature": raising(pynvml.NVML_ERROR_UNKNOWN)}
    lib = Quirky(sim, override=broken)
    source, telemetry = source_on(lib)
    with caplog.at_level(logging.INFO, logger="falcon_gpu"):
        for t in range(3):
            device = source.collect(1000.0 + t).devices[0]
            assert device.up and device.temperature_celsius is None
            assert device.power_limit_watts == 300 and device.power_watts == 100
        assert (
            lib.calls["nvmlDeviceGetTemperature"] == 3
        )  # unexpected errors are retried, unlike NOT_SUPPORTED
        assert telemetry.view().errors_total == {"nvml_field": 3}
        assert telemetry.is_failing("reader:thermal_power:GPU-a")
        lib.override.clear()
        assert source.collect(1010.0).devices[0].temperature_celsius == 40
    assert not telemetry.is_failing("reader:thermal_power:GPU-a")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "thermal_power" in warnings[0] and "nvmlDeviceGetTemperature" in warnings[0]
    assert any("works again" in r.getMessage() for r in caplog.records)


def test_a_reader_crashing_on_a_strange_answer_is_contained() -> None:
    sim = SimulatedNvml(
        scenario_of(gpu(power_watts=100, utilization_gpu_percent=5, utilization_memory_percent=1))
    )
    lib = Quirky(sim, override={"nvmlDeviceGetUtilizationRates": lambda h: object()})
    source, telemetry = source_on(lib)
    device = source.collect(1000.0).devices[0]
    assert device.up and device.utilization_ratio is None and device.power_watts == 100
    assert telemetry.view().errors_total == {"nvml_field": 1}


def test_fields_refused_under_mig_come_back_when_mig_is_turned_off() -> None:
    """NVML answers NOT_SUPPORTED for GPU utilisation while MIG is on; that must not be
    remembered past a MIG mode change, or GPUUtils stays missing until a restart."""
    sim = SimulatedNvml(scenario_of(gpu(utilization_gpu_percent=73, utilization_memory_percent=40)))
    mig_on = [True]

    def mig_mode(handle: Any) -> list[int]:
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if mig_on[0] else pynvml.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def utilization(handle: Any) -> Any:
        if mig_on[0]:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return sim.nvmlDeviceGetUtilizationRates(handle)

    lib = Quirky(
        sim, override={"nvmlDeviceGetMigMode": mig_mode, "nvmlDeviceGetUtilizationRates": utilization}
    )
    source, _ = source_on(lib)
    for t in (0.0, 30.0):
        dev = source.collect(t).devices[0]
        assert dev.mig_enabled and dev.utilization_ratio is None
    assert lib.calls["nvmlDeviceGetUtilizationRates"] == 1  # NOT_SUPPORTED is remembered meanwhile
    mig_on[0] = False
    source.collect(60.0)  # the cycle that sees MIG off
    dev = source.collect(90.0).devices[0]
    assert not dev.mig_enabled and dev.utilization_ratio == pytest.approx(0.73)


def test_minor_number_is_read_once_and_its_failure_is_not_a_lost_gpu() -> None:
    sim = SimulatedNvml(scenario_of(gpu(), gpu("GPU-b")))
    lib = Quirky(sim, override={"nvmlDeviceGetMinorNumber": lambda handle: 1 - handle.index})
    source, _ = source_on(lib)
    for t in (0.0, 30.0):
        assert [d.minor_number for d in source.collect(t).devices] == [1, 0]
    assert lib.calls["nvmlDeviceGetMinorNumber"] == 2  # identity: once per device
    broken = Quirky(sim, override={"nvmlDeviceGetMinorNumber": raising(pynvml.NVML_ERROR_UNKNOWN)})
    devices = source_on(broken)[0].collect(60.0).devices
    assert all(d.up for d in devices) and [d.minor_number for d in devices] == [None, None]
