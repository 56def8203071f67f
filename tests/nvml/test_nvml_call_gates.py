"""The NVML calls that are not made every cycle, both sides of each gate: asked when the answer may
have changed (and the reading then equals the scenario's), not asked when it cannot have (and the
reading is still the scenario's)."""

from __future__ import annotations

from typing import Any

import pynvml
import pytest

from falcon_gpu.model.snapshot import CLOCK_EVENT_REASONS
from falcon_gpu.simulator.nvml import violations
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.sources.nvml.slow import REFRESH_S
from tests.nvml.helpers import GIB, Quirky, expected_device, gpu, scenario_of, source_on

MPS_LIST = "nvmlDeviceGetMPSComputeRunningProcesses_v3"


def _run(sim: SimulatedNvml, times: list[float], fn: str) -> tuple[list[int], list[Any]]:
    """Per cycle (at ``times``): how often ``fn`` was called in it, and the device read."""
    source, telemetry = source_on(sim)
    asked, devices = [], []
    for t in times:
        before = sim.calls.get(fn, 0)
        devices.append(source.collect(1000.0 + t).devices[0])
        asked.append(sim.calls.get(fn, 0) - before)
    assert telemetry.view().errors_total == {}
    return asked, devices


def _matches(devices: list[Any], sim: SimulatedNvml, field: str) -> None:
    for cycle, device in enumerate(devices):
        want = expected_device(sim.scenario.gpus[0], cycle)[field]
        assert getattr(device, field) == pytest.approx(want), (cycle, field)


def _process(pid: int, name: str | None, kind: str, **extra: object) -> dict[str, object]:
    out: dict[str, object] = {"pid": pid, "type": kind, "used_memory_bytes": GIB, "sm_util_percent": 10}
    if name is not None:
        out["name"] = name
    out.update(extra)
    return out


def test_the_mps_list_is_asked_only_while_the_compute_list_holds_an_mps_server() -> None:
    sim = SimulatedNvml(scenario_of(gpu(processes=[
        _process(11, "trainer", "compute"),
        _process(20, "nvidia-cuda-mps-server", "compute", from_cycle=3, until_cycle=5),
        _process(21, "client", "mps", from_cycle=3, until_cycle=5),
    ])))  # fmt: skip
    asked, devices = _run(sim, [float(t) for t in range(7)], MPS_LIST)
    # cycle 0: nothing known yet; 3-4: the server runs; 5: the last answer had a client
    assert asked == [1, 0, 0, 1, 1, 1, 0]
    assert [sorted(p.pid for p in d.processes) for d in devices] == [[11]] * 3 + [[11, 20, 21]] * 2 + [
        [11]
    ] * 2
    assert [p.types for p in devices[3].processes if p.pid == 21] == [("mps",)]


def test_an_unnamed_process_opens_the_mps_gate_and_a_minute_opens_it_whatever() -> None:
    unnamed = SimulatedNvml(scenario_of(gpu(processes=[_process(11, None, "compute")])))
    assert _run(unnamed, [0.0, 1.0, 2.0], MPS_LIST)[0] == [1, 1, 1]  # no hostPID: it might be the server
    # a client whose server the compute list does not show (not what a driver does) is still seen
    # within a minute, and then asked for every cycle while it is listed
    hidden = SimulatedNvml(scenario_of(gpu(processes=[
        _process(11, "trainer", "compute"), _process(21, "client", "mps", from_cycle=2),
    ])))  # fmt: skip
    times = [0.0, 10.0, 20.0, 30.0, REFRESH_S, REFRESH_S + 10, REFRESH_S + 20]
    asked, devices = _run(hidden, times, MPS_LIST)
    assert asked == [1, 0, 0, 0, 1, 1, 1]
    assert [len(d.processes) for d in devices] == [1, 1, 1, 1, 2, 2, 2]


def test_the_memory_clock_is_read_again_when_the_pstate_changes_and_once_a_minute() -> None:
    sim = SimulatedNvml(scenario_of(gpu(
        performance_state=[0, 0, 2, 2, 2, 2, 0, 0, 0, 0],
        memory_clock_mhz=[1215, 1215, 405, 405, 405, 405, 1215, 1215, 1593, 1593],  # then locked (-lmc)
        sm_clock_mhz=1410, temperature_celsius=50,
    )))  # fmt: skip
    times = [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 130.0]
    source, _ = source_on(sim)
    per_cycle, clocks = [], []
    for t in times:
        before = sim.calls.get("nvmlDeviceGetClockInfo", 0)
        clocks.append(source.collect(1000.0 + t).devices[0].memory_clock_hertz)
        per_cycle.append(sim.calls["nvmlDeviceGetClockInfo"] - before - 1)  # minus the SM clock
    # 2 and 6: the P-state changed (2 -> 3: the new clock agrees with the one before, settled);
    # 8: a clock locked within P0 is seen once the minute is up (130 s: 60 s after the read at 70)
    assert per_cycle == [1, 0, 1, 1, 0, 0, 1, 1, 0, 1]
    assert clocks == [1215e6, 1215e6, 405e6, 405e6, 405e6, 405e6, 1215e6, 1215e6, 1215e6, 1593e6]


def test_the_fan_is_read_again_when_the_temperature_changes_until_it_settles() -> None:
    sim = SimulatedNvml(scenario_of(gpu(
        temperature_celsius=[50, 50, 50, 64, 64, 64, 64, 64],
        fan_speed_percent=[30, 30, 30, 40, 48, 50, 50, 50],  # ramping to the new speed
    )))  # fmt: skip
    asked, devices = _run(sim, [float(t) for t in range(8)], "nvmlDeviceGetFanSpeed")
    assert asked == [1, 0, 0, 1, 1, 1, 1, 0]  # asked until two answers agree (50, 50)
    _matches(devices, sim, "fan_speed_ratio")


def test_without_the_pstate_or_the_temperature_to_follow_the_memory_clock_and_fan_are_asked_every_cycle() -> (
    None
):
    sim = SimulatedNvml(
        scenario_of(gpu(sm_clock_mhz=1410, memory_clock_mhz=[1215, 405, 405], fan_speed_percent=[30, 30, 40]))
    )
    source, _ = source_on(sim)
    devices = [source.collect(1000.0 + t).devices[0] for t in range(3)]
    assert sim.calls["nvmlDeviceGetClockInfo"] == 3 * 2 and sim.calls["nvmlDeviceGetFanSpeed"] == 3
    _matches(devices, sim, "memory_clock_hertz")
    _matches(devices, sim, "fan_speed_ratio")


def test_a_gpu_without_a_fan_is_asked_once() -> None:
    sim = SimulatedNvml(
        scenario_of(gpu(temperature_celsius=[50, 60, 70], not_supported=["fan_speed_percent"]))
    )
    asked, devices = _run(sim, [0.0, 1.0, 2.0], "nvmlDeviceGetFanSpeed")
    assert asked == [1, 0, 0] and all(d.fan_speed_ratio is None for d in devices)


ENCODING = [0, 0, 30, 25, 0, 0, 0]


@pytest.mark.parametrize("engine", ["encoder", "decoder"])
def test_an_engine_is_asked_while_a_process_sample_shows_it_in_use_and_until_it_is_back_at_zero(
    engine: str,
) -> None:
    sim = SimulatedNvml(scenario_of(gpu(
        processes=[_process(11, "ffmpeg", "compute")],
        **{"encoder_percent": 0, "decoder_percent": 0, f"{engine}_percent": ENCODING},
    )))  # fmt: skip
    fn = f"nvmlDeviceGet{engine.title()}Utilization"
    asked, devices = _run(sim, [float(t) for t in range(len(ENCODING))], fn)
    assert asked == [1, 0, 1, 1, 1, 0, 0]  # 2-3: a sample shows it; 4: the last answer was 25
    _matches(devices, sim, f"{engine}_utilization_ratio")
    assert [getattr(d, f"{engine}_utilization_ratio") for d in devices] == [0, 0, 0.3, 0.25, 0, 0, 0]


def test_without_process_samples_the_engines_are_asked_every_cycle() -> None:
    sim = SimulatedNvml(scenario_of(gpu(
        processes=[_process(11, "ffmpeg", "compute")], encoder_percent=[0, 0, 30, 0],
        decoder_percent=0, not_supported=["process_utilization"],
    )))  # fmt: skip
    asked, devices = _run(sim, [0.0, 1.0, 2.0, 3.0], "nvmlDeviceGetEncoderUtilization")
    assert asked == [1, 1, 1, 1]
    _matches(devices, sim, "encoder_utilization_ratio")


GRAPHICS_LIST = "nvmlDeviceGetGraphicsRunningProcesses_v3"


def _unsampled(pid: int, kind: str, **extra: object) -> dict[str, object]:
    """A process that runs no kernels: the process-utilisation samples do not name it."""
    return {"pid": pid, "name": "Xorg", "type": kind, "used_memory_bytes": GIB, **extra}


def _pids(devices: list[Any], kind: str) -> list[list[int]]:
    return [sorted(p.pid for p in d.processes if kind in p.types) for d in devices]


def test_the_graphics_list_is_asked_when_a_sample_names_a_pid_no_other_list_has() -> None:
    sim = SimulatedNvml(scenario_of(gpu(memory_total_bytes=40 * GIB, memory_used_bytes=5 * GIB, processes=[
        _process(11, "trainer", "compute"),
        _process(30, "Xorg", "graphics", from_cycle=3, until_cycle=5),
    ])))  # fmt: skip
    asked, devices = _run(sim, [float(t) for t in range(7)], GRAPHICS_LIST)
    # 0: nothing known yet; 3: a sample names PID 30; 4: it is listed; 5: the last answer listed it
    assert asked == [1, 0, 0, 1, 1, 1, 0]
    assert _pids(devices, "graphics") == [[]] * 3 + [[30]] * 2 + [[]] * 2
    assert [p.types for p in devices[3].processes] == [("compute",), ("graphics",)]


def test_the_graphics_list_is_asked_when_device_memory_grows_beyond_the_listed_processes() -> None:
    sim = SimulatedNvml(scenario_of(gpu(
        memory_total_bytes=40 * GIB,
        # 3: a graphics context allocates 1 GiB; 5: a compute process grows by 2 GiB (the device with it)
        memory_used_bytes=[5 * GIB] * 3 + [6 * GIB] * 2 + [8 * GIB] * 3,
        processes=[
            _process(11, "trainer", "compute", used_memory_bytes=[GIB] * 5 + [3 * GIB] * 3),
            _unsampled(30, "graphics", from_cycle=3),
        ],
    )))  # fmt: skip
    asked, devices = _run(sim, [float(t) for t in range(8)], GRAPHICS_LIST)
    assert asked == [1, 0, 0, 1, 1, 1, 1, 1]  # from 3 on: the last answer listed PID 30
    assert _pids(devices, "graphics") == [[]] * 3 + [[30]] * 5
    quiet = SimulatedNvml(scenario_of(gpu(
        memory_total_bytes=40 * GIB,
        memory_used_bytes=[5 * GIB] * 3 + [4 * GIB] * 2 + [7 * GIB] * 3,  # 3: freed; 5: grows as PID 11
        processes=[_process(11, "trainer", "compute", used_memory_bytes=[GIB] * 5 + [4 * GIB] * 3)],
    )))  # fmt: skip
    assert _run(quiet, [float(t) for t in range(8)], GRAPHICS_LIST)[0] == [1, 0, 0, 0, 0, 0, 0, 0]


def test_a_graphics_process_nothing_else_shows_is_seen_within_a_minute() -> None:
    sim = SimulatedNvml(scenario_of(gpu(
        memory_total_bytes=40 * GIB, memory_used_bytes=5 * GIB,
        processes=[_process(11, "trainer", "compute"), _unsampled(30, "graphics", from_cycle=2)],
    )))  # fmt: skip
    times = [0.0, 10.0, 20.0, 30.0, REFRESH_S, REFRESH_S + 10]
    asked, devices = _run(sim, times, GRAPHICS_LIST)
    assert asked == [1, 0, 0, 0, 1, 1]
    assert _pids(devices, "graphics") == [[]] * 4 + [[30]] * 2


@pytest.mark.parametrize("missing", ["process_utilization", "memory_used_bytes"])
def test_without_process_samples_or_device_memory_the_graphics_list_is_asked_every_cycle(
    missing: str,
) -> None:
    scenario = gpu(
        memory_total_bytes=40 * GIB, memory_used_bytes=5 * GIB, processes=[_process(11, "trainer", "compute")]
    )
    if missing == "memory_used_bytes":
        del scenario["memory_used_bytes"], scenario["memory_total_bytes"]
    else:
        scenario["not_supported"] = [missing]
    sim = SimulatedNvml(scenario_of(scenario))
    asked, _ = _run(sim, [0.0, 1.0, 2.0, 3.0], GRAPHICS_LIST)
    assert asked == [1, 1, 1, 1]


REASONS = "nvmlDeviceGetCurrentClocksEventReasons"


def _clocked(**extra: object) -> dict[str, object]:
    """A GPU with an SM clock and a utilisation, which the mask's gate follows; no limiter at first."""
    values: dict[str, object] = {"sm_clock_mhz": 1410, "utilization_gpu_percent": 80,
                                 "utilization_memory_percent": 30, "clock_event_reasons": []}  # fmt: skip
    return gpu(**{**values, **extra})


LIMITERS = {"sw_power_cap", "hw_slowdown", "sync_boost", "sw_thermal", "hw_thermal", "hw_power_brake"}
THROTTLE_IDS = (
    pynvml.NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS,
    pynvml.NVML_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS,
)


class _Throttles:
    """A driver whose clock event reasons change mid-run (a scenario's mask holds for the whole run):
    cycle N answers ``masks[N]``, and the throttle counters advance 1 s for each cycle whose mask holds
    a limiter (``counters=False``: they answer NOT_SUPPORTED)."""

    def __init__(self, sim: SimulatedNvml, masks: list[tuple[str, ...]], *, counters: bool = True) -> None:
        self.sim, self.masks, self.counters = sim, masks, counters
        self.cycle = 0

    def reasons(self, handle: Any) -> int:
        return sum(1 << CLOCK_EVENT_REASONS.index(name) for name in self.masks[self.cycle])

    def field_values(self, handle: Any, ids: list[Any]) -> Any:
        values = self.sim.nvmlDeviceGetFieldValues(handle, ids)
        held = sum(1_000_000_000 for mask in self.masks[: self.cycle + 1] if LIMITERS.intersection(mask))
        for value in values:
            if value.fieldId in THROTTLE_IDS:
                value.nvmlReturn = pynvml.NVML_SUCCESS if self.counters else pynvml.NVML_ERROR_NOT_SUPPORTED
                value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                value.value.ullVal = held
        return values


def _run_masks(
    sim: SimulatedNvml, masks: list[tuple[str, ...]], *, counters: bool = True
) -> tuple[list[int], list[Any]]:
    """Per cycle (one a second): whether the mask was asked in it, and the reasons read."""
    throttles = _Throttles(sim, masks, counters=counters)
    library = Quirky(
        sim, override={REASONS: throttles.reasons, "nvmlDeviceGetFieldValues": throttles.field_values}
    )
    source, telemetry = source_on(library)
    asked, devices = [], []
    for cycle in range(len(masks)):
        throttles.cycle = cycle
        before = library.calls.get(REASONS, 0)
        devices.append(source.collect(1000.0 + cycle).devices[0])
        asked.append(library.calls.get(REASONS, 0) - before)
    assert telemetry.view().errors_total == {}
    return asked, [d.clock_event_reasons for d in devices]


def test_a_throttle_shows_in_the_mask_the_cycle_it_starts_and_the_cycle_it_stops() -> None:
    sim = SimulatedNvml(scenario_of(_clocked()))
    cap = ("sw_power_cap",)
    asked, masks = _run_masks(sim, [()] * 3 + [cap] * 3 + [()] * 3)
    # 0: nothing known; 3: the counters moved; 4-5: the last mask held a limiter; 6: it did, and the
    # answer changed; 7: until two answers agree
    assert asked == [1, 0, 0, 1, 1, 1, 1, 1, 0]
    assert masks == [frozenset()] * 3 + [frozenset(cap)] * 3 + [frozenset()] * 3


def test_the_idle_and_applications_clocks_bits_follow_the_utilisation_and_the_sm_clock() -> None:
    sim = SimulatedNvml(scenario_of(_clocked(
        sm_clock_mhz=[1410] * 5 + [1200] * 3, utilization_gpu_percent=[80, 80, 0, 0, 0, 60, 60, 60]
    )))  # fmt: skip
    asked, masks = _run_masks(sim, [()] * 2 + [("idle",)] * 3 + [("applications_clocks",)] * 3)
    assert asked == [1, 0, 1, 1, 0, 1, 1, 0]  # 2: idle; 5: the SM clock and the utilisation moved
    assert masks == [frozenset()] * 2 + [frozenset({"idle"})] * 3 + [frozenset({"applications_clocks"})] * 3


def test_the_mask_is_asked_once_a_minute_and_every_cycle_without_the_throttle_counters() -> None:
    steady = SimulatedNvml(scenario_of(_clocked()))
    asked, _ = _run(steady, [0.0, 10.0, 20.0, REFRESH_S, REFRESH_S + 10], REASONS)
    assert asked == [1, 0, 0, 1, 0]
    sim = SimulatedNvml(scenario_of(_clocked()))
    asked, masks = _run_masks(sim, [(), (), ("sw_thermal",), ()], counters=False)
    assert asked == [1, 1, 1, 1]
    assert masks == [frozenset(), frozenset(), frozenset({"sw_thermal"}), frozenset()]


def test_the_simulated_throttle_counters_advance_a_second_a_cycle_while_the_mask_holds_a_limiter() -> None:
    ids = list(THROTTLE_IDS)
    for reasons, per_cycle in ((["sw_power_cap", "idle"], 1_000_000_000), (["idle"], 0)):
        sim = SimulatedNvml(scenario_of(_clocked(clock_event_reasons=reasons)))
        sim.nvmlInit()
        handle = sim.nvmlDeviceGetHandleByIndex(0)
        for cycle in range(3):
            sim.nvmlDeviceGetCount()  # the next cycle
            values = sim.nvmlDeviceGetFieldValues(handle, ids)
            assert [(v.nvmlReturn, v.value.ullVal) for v in values] == [(0, per_cycle * (cycle + 1))] * 2
        assert violations.advancing(handle.gpu) is bool(per_cycle)
