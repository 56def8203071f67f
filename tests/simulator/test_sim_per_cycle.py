"""The simulator works out each device's answers once per cycle: nothing a caller sees changes.

Every answer of a simulator that keeps its answers is compared, cycle by cycle, with a simulator
that works every call out again (``Recomputing``: the same code with the keeping switched off), on
every bundled scenario and on one whose lists, processes, MIG instances and MIG mode change at
different cycles, past the cycle where each GPU's scenario stops changing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any, TypeVar

import pynvml
import pytest

from falcon_gpu.simulator.nvml.core import MAX_ANSWERS, STAMPS_KEPT, NvmlStruct, SimDevice, SimMigDevice
from falcon_gpu.simulator.nvml.device import FIELD_VALUES, SCOPED_FIELD_VALUES
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.simulator.nvml.processes import MAX_MIG_DEVICES
from falcon_gpu.simulator.scenario.model import settled_cycle
from falcon_gpu.simulator.scenario.parse import (
    Scenario,
    bundled_names,
    load_scenario,
    parse_scenario,
    resolve_scenario,
)

CLOCK = 1000.0
T = TypeVar("T")


class Recomputing(SimulatedNvml):
    """Works out every answer on every call, as the simulator did before it kept them."""

    def _memo(self, dev: SimDevice, key: Any, make: Callable[..., T], *args: Any) -> T:
        return make(*args)

    def _sampled(self, dev: SimDevice, cycle: int) -> list[Any]:
        dev.samples.clear()
        return super()._sampled(dev, cycle)

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        self._names = None
        return super().nvmlSystemGetProcessName(pid)


def plain(answer: Any) -> Any:
    """An answer in a form two simulators' answers can be compared in."""
    if isinstance(answer, list | tuple):
        return [plain(a) for a in answer]
    if isinstance(answer, NvmlStruct):
        return {k: plain(v) for k, v in vars(answer).items()}
    if isinstance(answer, SimMigDevice):
        return ("mig handle", answer.parent.index, answer.slot, answer.mig.uuid)
    if isinstance(answer, SimDevice):
        return ("handle", answer.index)
    if isinstance(answer, ctypes.Array):  # field values
        return bytes(answer)
    return answer


def ask(fn: Any, *args: Any) -> Any:
    try:
        return plain(fn(*args))
    except pynvml.NVMLError as exc:
        return ("error", exc.value)


FIELDS = [*FIELD_VALUES, 999_999, *((f, s) for f in SCOPED_FIELD_VALUES for s in (0, 1, 17, 0xFFFFFFFF))]
PER_DEVICE: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("nvmlDeviceGetName", ()), ("nvmlDeviceGetUUID", ()), ("nvmlDeviceGetPciInfo", ()),
    ("nvmlDeviceGetMinorNumber", ()),
    ("nvmlDeviceGetMemoryInfo", ()), ("nvmlDeviceGetMemoryInfo", (pynvml.nvmlMemory_v2,)),
    ("nvmlDeviceGetMemoryInfo", (7,)), ("nvmlDeviceGetUtilizationRates", ()),
    ("nvmlDeviceGetEncoderUtilization", ()), ("nvmlDeviceGetDecoderUtilization", ()),
    ("nvmlDeviceGetTemperature", (pynvml.NVML_TEMPERATURE_GPU,)), ("nvmlDeviceGetTemperature", (99,)),
    ("nvmlDeviceGetFieldValues", (FIELDS,)), ("nvmlDeviceGetFieldValues", (FIELDS[:3],)),
    ("nvmlDeviceGetFieldValues", ([],)),
    ("nvmlDeviceGetPowerUsage", ()), ("nvmlDeviceGetEnforcedPowerLimit", ()),
    ("nvmlDeviceGetTotalEnergyConsumption", ()), ("nvmlDeviceGetPerformanceState", ()),
    ("nvmlDeviceGetFanSpeed", ()), ("nvmlDeviceGetClockInfo", (pynvml.NVML_CLOCK_SM,)),
    ("nvmlDeviceGetClockInfo", (pynvml.NVML_CLOCK_MEM,)), ("nvmlDeviceGetCurrentClocksEventReasons", ()),
    ("nvmlDeviceGetCurrentClocksThrottleReasons", ()), ("nvmlDeviceGetPcieReplayCounter", ()),
    *(("nvmlDeviceGetTotalEccErrors", (e, c)) for e in (0, 1) for c in (0, 1)),
    *(("nvmlDeviceGetRetiredPages", (cause,)) for cause in (0, 1)),
    ("nvmlDeviceGetRetiredPagesPendingStatus", ()), ("nvmlDeviceGetRemappedRows", ()),
    ("nvmlDeviceValidateInforom", ()), ("nvmlDeviceGetMigMode", ()), ("nvmlDeviceGetMaxMigDeviceCount", ()),
    *((f"nvmlDevice{k}RunningProcesses{v}", ()) for k in ("GetCompute", "GetGraphics", "GetMPSCompute")
      for v in ("", "_v2", "_v3")),
    *(("nvmlDeviceGetMigDeviceHandleByIndex", (i,)) for i in range(MAX_MIG_DEVICES + 1)),
)  # fmt: skip
PER_MIG = ("nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetMemoryInfo",
           "nvmlDeviceGetUtilizationRates",
           "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses",
           "nvmlDeviceGetProcessUtilization", "nvmlDeviceGetGpuInstanceId")  # fmt: skip


def one_cycle(sim: SimulatedNvml, scenario: Scenario, last_seen: list[int]) -> list[Any]:
    """Everything the simulator answers in the cycle it is in, each question asked twice."""
    out: list[Any] = []
    for index in range(len(scenario.gpus)):
        h = sim.nvmlDeviceGetHandleByIndex(index)
        for _ in range(2):
            out += [ask(getattr(sim, fn), h, *args) for fn, args in PER_DEVICE]
            out.append(ask(sim.nvmlDeviceGetProcessUtilization, h, last_seen[index]))
            out.append(ask(sim.nvmlDeviceGetProcessUtilization, h, 0))
        samples = out[-1]
        if isinstance(samples, list):
            last_seen[index] = max(s["timeStamp"] for s in samples)
        for slot in range(MAX_MIG_DEVICES):
            try:
                mig = sim.nvmlDeviceGetMigDeviceHandleByIndex(h, slot)
            except pynvml.NVMLError:
                continue
            out += [
                ask(getattr(sim, fn), mig, *((0,) if "ProcessUtilization" in fn else ())) for fn in PER_MIG
            ]
    pids = {p.pid for g in scenario.gpus for p in (*g.processes, *(q for m in g.mig for q in m.processes))}
    out += [ask(sim.nvmlSystemGetProcessName, pid) for pid in (*sorted(pids), 424242)]
    return out


CHANGING = {
    "gpus": [
        {
            "uuid": "GPU-a", "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 80e9,
            "memory_used_bytes": [1e9, 2e9, 3e9], "memory_reserved_bytes": 1e8, "power_watts": [100.4, 200.6],
            "temperature_celsius": 50, "energy_joules": [10, 20, 30, 40, 50], "sm_clock_mhz": 1980,
            "encoder_percent": [0, 0, 40], "decoder_percent": [0, 10, 0],
            "ecc": {"corrected_volatile": [0, 1, 2, 3, 4, 5]}, "pcie": {"tx_bytes": [1e6, 2e6]},
            "remapped_rows": {"correctable": [0, 2], "uncorrectable": 0, "pending": True},
            "retired_pages": {"single_bit": [0, 0, 0, 2], "double_bit": 1, "pending": False},
            "nvlink": [{"link": 0, "tx_bytes": [1024, 4096], "rx_bytes": 2048, "crc_flit_errors": [0, 0, 3]},
                       {"link": 1, "tx_bytes": 8192}],
            "not_supported": ["fan_speed_percent"],
            "processes": [
                {"pid": 1, "name": "a", "used_memory_bytes": [10, 20], "sm_util_percent": [50, 70]},
                {"pid": 2, "name": "b", "type": ["graphics", "mps"], "from_cycle": 3, "until_cycle": 6},
                {"pid": 3, "sm_util_percent": 5, "from_cycle": 7},
            ],
        },
        {
            "uuid": "GPU-b", "name": "NVIDIA A100-SXM4-40GB", "mig_mode": [0, 1, 1, 1, 0, 1],
            "memory_total_bytes": 40e9, "memory_used_bytes": 1e9, "lost_at_cycle": 9,
            "mig": [
                {"gpu_instance_id": 1, "profile": "3g.20gb", "uuid": "MIG-1", "memory_total_bytes": 20e9,
                 "memory_used_bytes": [1e9, 2e9], "placement_start": 0,
                 "processes": [{"pid": 11, "name": "m", "used_memory_bytes": [5, 6, 7]}]},
                {"gpu_instance_id": 2, "profile": "1g.5gb", "uuid": "MIG-2", "memory_total_bytes": 5e9,
                 "memory_used_bytes": 1e9, "from_cycle": 2, "until_cycle": 4},
            ],
        },
    ]
}  # fmt: skip


def test_settled_cycle_is_the_last_cycle_anything_changes() -> None:
    a, b = parse_scenario(CHANGING).gpus
    assert settled_cycle(a) == 7  # pid 3 starts in cycle 7 (the longest list, ECC's, ends at 5)
    assert settled_cycle(b) == 9  # lost in cycle 9 (its MIG mode settles at 5)
    assert settled_cycle(parse_scenario({"gpus": [{"uuid": "G", "name": "n"}]}).gpus[0]) == 0


@pytest.mark.parametrize("name", ["changing", *bundled_names()])
def test_every_answer_is_what_working_it_out_again_gives(name: str) -> None:
    scenario = parse_scenario(CHANGING) if name == "changing" else load_scenario(resolve_scenario(name))
    kept, again = SimulatedNvml(scenario, clock=lambda: CLOCK), Recomputing(scenario, clock=lambda: CLOCK)
    seen_kept, seen_again = [0] * len(scenario.gpus), [0] * len(scenario.gpus)
    kept.nvmlInit()
    again.nvmlInit()
    before = one_cycle(kept, scenario, seen_kept)  # before the first nvmlDeviceGetCount: cycle 0, no stamp
    assert before == one_cycle(again, scenario, seen_again)
    last = max((settled_cycle(g) for g in scenario.gpus), default=0) + 3
    for cycle in range(last):
        kept.nvmlDeviceGetCount()
        again.nvmlDeviceGetCount()
        assert one_cycle(kept, scenario, seen_kept) == one_cycle(again, scenario, seen_again), cycle
    assert kept.calls == again.calls  # every call counted, kept or not


def test_a_kept_answer_is_still_counted_checked_and_refused_on_every_call() -> None:
    sim = SimulatedNvml(parse_scenario(CHANGING))
    sim.nvmlInit()
    h = sim.nvmlDeviceGetHandleByIndex(0)
    for _ in range(3):
        assert ask(sim.nvmlDeviceGetFanSpeed, h) == ("error", pynvml.NVML_ERROR_NOT_SUPPORTED)
    assert sim.calls["nvmlDeviceGetFanSpeed"] == 3
    listed = sim.nvmlDeviceGetComputeRunningProcesses_v3(h)
    listed.clear()  # the caller's own list: the next answer is whole
    assert [p.pid for p in sim.nvmlDeviceGetComputeRunningProcesses_v3(h)] == [1]
    sim.nvmlShutdown()
    assert ask(sim.nvmlDeviceGetPowerUsage, h) == ("error", pynvml.NVML_ERROR_UNINITIALIZED)
    sim.nvmlInit()
    lost = sim.nvmlDeviceGetHandleByIndex(1)
    for _ in range(10):
        sim.nvmlDeviceGetCount()
    assert sim.cycle == 9
    assert ask(sim.nvmlDeviceGetMemoryInfo, lost) == ("error", pynvml.NVML_ERROR_GPU_IS_LOST)
    assert sim.nvmlDeviceGetUUID(lost) == "GPU-b"  # identity still answers for a lost GPU


def test_field_values_carry_each_cycles_stamp_once_the_values_are_settled() -> None:
    now = [CLOCK]
    sim = SimulatedNvml(parse_scenario({"gpus": [{"uuid": "G", "name": "n", "power_watts": 100}]}),
                        clock=lambda: now[0])  # fmt: skip
    sim.nvmlInit()
    h = sim.nvmlDeviceGetHandleByIndex(0)
    for second in range(3):
        now[0] = CLOCK + second
        sim.nvmlDeviceGetCount()
        power, unknown = sim.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_POWER_INSTANT, 999_999])
        assert (power.nvmlReturn, power.value.uiVal) == (pynvml.NVML_SUCCESS, 100_000)
        assert unknown.nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
        assert power.timestamp == unknown.timestamp == int(now[0] * 1_000_000)


def test_what_is_kept_stays_bounded() -> None:
    sim = SimulatedNvml(parse_scenario(CHANGING), clock=lambda: CLOCK)
    sim.nvmlInit()
    h = sim.nvmlDeviceGetHandleByIndex(0)
    sim.nvmlDeviceGetCount()
    for n in range(MAX_ANSWERS + 10):  # ever new lists of field IDs
        sim.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_POWER_INSTANT] * (n % 7 + 1) + [n])
    dev = sim._devices[0]
    assert 0 < len(dev.answers) <= MAX_ANSWERS
    for _ in range(STAMPS_KEPT + 20):
        sim.nvmlDeviceGetCount()
        sim.nvmlDeviceGetProcessUtilization(h, 0)
    assert len(dev.samples) <= STAMPS_KEPT
    assert len(sim.nvmlDeviceGetProcessUtilization(h, 0)) == STAMPS_KEPT * 2  # pids 1 and 3, each cycle
