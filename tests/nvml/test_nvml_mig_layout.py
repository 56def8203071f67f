"""A MIG GPU's instance layout (handles and identities) is read once and kept: what it costs per
cycle, and that nothing is lost when an administrator creates or destroys an instance or turns
MIG off and on (the gates of :mod:`falcon_gpu.sources.nvml.readers.mig`)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pynvml
import pytest

from falcon_gpu.model.snapshot import DeviceReading
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.simulator.scenario.parse import MigScenario, at, parse_scenario, resolve_scenario
from falcon_gpu.sources.nvml.slow import REFRESH_S
from tests.nvml.helpers import GIB, Quirky, gpu, scenario_of, source_on

HANDLE = "nvmlDeviceGetMigDeviceHandleByIndex"
IDENTITY = (HANDLE, "nvmlDeviceGetUUID", "nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetComputeInstanceId",
            "nvmlDeviceGetName")  # fmt: skip
"""The calls the kept layout saves (on a MIG GPU the parent's own identity is read once anyway)."""

MIG_PER_CYCLE = {
    "nvmlDeviceGetMemoryInfo": 5,
    "nvmlDeviceGetComputeRunningProcesses_v3": 5,
    "nvmlDeviceGetGraphicsRunningProcesses_v3": 5,
    "nvmlGpmSampleGet": 1,
    "nvmlGpmMigSampleGet": 4,
    "nvmlGpmMetricsGet": 5,
    "nvmlDeviceGetTemperature": 1,
    "nvmlDeviceGetFieldValues": 1,
    "nvmlDeviceGetPerformanceState": 1,
    "nvmlDeviceGetClockInfo": 1,
    "nvmlDeviceGetCurrentClocksEventReasons": 1,
    "nvmlDeviceGetEncoderUtilization": 1,
    "nvmlDeviceGetDecoderUtilization": 1,
}
"""The bundled ``mig-node`` H100 (GPM on, four instances on seven slots) per cycle within the minute:
the GPU's own 12 (no utilisation rates or process samples under MIG; so the engines are asked every
cycle) and 5 per instance (memory, compute and graphics lists, GPM sample and metrics): 32, down from 55
while each instance's UUID, name, GPU and compute instance IDs and all 7 slots were asked every cycle."""


def _mig_node_h100() -> Any:
    data = json.loads(resolve_scenario("mig-node").read_text(encoding="utf-8"))
    return parse_scenario({"gpus": [data["gpus"][0]]})


def test_a_mig_gpu_costs_32_calls_per_cycle_and_its_identity_none() -> None:
    sim = SimulatedNvml(_mig_node_h100())
    source, telemetry = source_on(sim)
    source.collect(1000.0)
    before = dict(sim.calls)
    for t in range(1, 11):  # ten cycles within the minute
        device = source.collect(1000.0 + t).devices[0]
    per_cycle = {fn: (n - before.get(fn, 0)) / 10 for fn, n in sim.calls.items() if n != before.get(fn, 0)}
    assert per_cycle.pop("nvmlDeviceGetCount") == 1
    assert per_cycle == MIG_PER_CYCLE
    assert sum(per_cycle.values()) == 32
    assert telemetry.view().errors_total == {}
    # what the kept layout gives is still the scenario's, cycle 10's values included
    _assert_instances(device, sim.scenario.gpus[0].mig, 10)


def _assert_instances(device: DeviceReading, want: tuple[MigScenario, ...], cycle: int) -> None:
    assert [(m.uuid, m.profile, m.gpu_instance_id, m.compute_instance_id) for m in device.mig] == [
        (m.uuid, m.profile, m.gpu_instance_id, m.compute_instance_id) for m in want
    ]
    assert [m.memory_used_bytes for m in device.mig] == [
        None if m.memory_used_bytes is None else at(m.memory_used_bytes, cycle) for m in want
    ]
    assert [{p.pid for p in m.processes} for m in device.mig] == [{p.pid for p in m.processes} for m in want]


def _instance(gi: int, used_gib: float, **extra: object) -> dict[str, object]:
    out: dict[str, object] = {
        "gpu_instance_id": gi, "profile": "1g.10gb", "uuid": f"MIG-{gi}",
        "memory_total_bytes": 10 * GIB, "memory_used_bytes": used_gib * GIB,
        "processes": [{"pid": 100 + gi, "used_memory_bytes": GIB}],
    }  # fmt: skip
    out.update(extra)
    return out


def _mig_a100(*instances: dict[str, object], **extra: object) -> SimulatedNvml:
    return SimulatedNvml(
        scenario_of(gpu(memory_total_bytes=40 * GIB, memory_used_bytes=5 * GIB, mig=list(instances), **extra))
    )


def _run(sim: Any, times: list[float]) -> tuple[list[DeviceReading], list[int], Any]:
    """The device read at each of ``times`` (seconds from the start), and the slot lookups per cycle."""
    calls = sim.sim.calls if isinstance(sim, Quirky) else sim.calls
    source, telemetry = source_on(sim)
    devices, lookups = [], []
    for t in times:
        before = calls.get(HANDLE, 0)
        devices.append(source.collect(1000.0 + t).devices[0])
        lookups.append(calls.get(HANDLE, 0) - before)
    return devices, lookups, telemetry


def _uuids(devices: list[DeviceReading]) -> list[list[str]]:
    return [[m.uuid for m in d.mig] for d in devices]


def test_an_instance_created_mid_run_shows_at_the_next_refresh() -> None:
    sim = _mig_a100(_instance(1, 2), _instance(2, 3, from_cycle=2))
    times = [10.0 * c for c in range(8)]  # cycle c at 10 c seconds; the layout is a minute old at 60
    assert REFRESH_S == 60
    devices, lookups, telemetry = _run(sim, times)
    assert _uuids(devices) == [["MIG-1"]] * 6 + [["MIG-1", "MIG-2"]] * 2
    assert lookups == [7, 0, 0, 0, 0, 0, 7, 0]
    assert devices[6].mig[1].memory_used_bytes == 3 * GIB
    assert {p.pid for p in devices[6].processes} == {101, 102}
    assert telemetry.view().errors_total == {}


@pytest.mark.parametrize("gone", [pynvml.NVML_ERROR_NOT_FOUND, pynvml.NVML_ERROR_INVALID_ARGUMENT])
def test_a_destroyed_instance_disappears_the_cycle_it_fails_logged_once_and_not_counted(
    gone: int, caplog: pytest.LogCaptureFixture
) -> None:
    sim = _mig_a100(_instance(1, 2), _instance(2, 3, until_cycle=3), _instance(3, 4))

    def memory_info(handle: Any, **kwargs: Any) -> Any:
        try:
            return sim.nvmlDeviceGetMemoryInfo(handle, **kwargs)
        except pynvml.NVMLError as exc:  # a driver may answer INVALID_ARGUMENT for a stale handle
            if exc.value == pynvml.NVML_ERROR_NOT_FOUND:
                raise pynvml.NVMLError(gone) from None
            raise

    lib = Quirky(sim, override={"nvmlDeviceGetMemoryInfo": memory_info})
    with caplog.at_level(logging.INFO, logger="falcon_gpu"):
        devices, lookups, telemetry = _run(lib, [float(c) for c in range(6)])
    assert _uuids(devices) == [["MIG-1", "MIG-2", "MIG-3"]] * 3 + [["MIG-1", "MIG-3"]] * 3
    assert lookups == [7, 0, 0, 7, 0, 0]  # enumerated again once, in the cycle it failed
    assert [m.memory_used_bytes for m in devices[3].mig] == [2 * GIB, 4 * GIB]
    assert {p.pid for p in devices[3].processes} == {101, 103}
    view = telemetry.view()
    assert view.errors_total == {} and view.readers["mig"][0] is True
    about = [r for r in caplog.records if "MIG-2" in r.getMessage() and "not supported" not in r.getMessage()]
    assert len(about) == 1 and "destroyed" in about[0].getMessage() and about[0].levelno == logging.INFO


def test_an_instance_whose_memory_fails_for_real_stays_and_is_counted() -> None:
    sim = _mig_a100(_instance(1, 2), _instance(2, 3))

    def memory_info(handle: Any, **kwargs: Any) -> Any:
        if getattr(handle, "slot", None) == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
        return sim.nvmlDeviceGetMemoryInfo(handle, **kwargs)

    devices, lookups, telemetry = _run(Quirky(sim, override={"nvmlDeviceGetMemoryInfo": memory_info}), [0, 1])
    assert _uuids(devices) == [["MIG-1", "MIG-2"]] * 2
    assert [m.memory_used_bytes for m in devices[1].mig] == [2 * GIB, None]
    assert [len(m.processes) for m in devices[1].mig] == [1, 1]
    assert telemetry.view().errors_total == {"nvml_field": 2}
    assert lookups == [14, 7]  # still there: looked up again to tell, each cycle it fails


def test_mig_turned_off_is_seen_the_cycle_its_instances_fail_and_on_again_within_the_minute() -> None:
    # MIG off from cycle 2 (t=20) to cycle 8 (t=80)
    sim = _mig_a100(_instance(1, 2), _instance(2, 3), mig_mode=[1, 1, 0, 0, 0, 0, 0, 0, 1],
                    utilization_gpu_percent=40, utilization_memory_percent=20)  # fmt: skip
    mode_reads = []
    source, telemetry = source_on(sim)
    devices, lookups = [], []
    for c in range(12):
        before, mode = sim.calls[HANDLE], sim.calls["nvmlDeviceGetMigMode"]
        devices.append(source.collect(1000.0 + 10 * c).devices[0])
        lookups.append(sim.calls[HANDLE] - before)
        mode_reads.append(sim.calls["nvmlDeviceGetMigMode"] - mode)
    assert [d.mig_enabled for d in devices] == [True] * 2 + [False] * 6 + [True] * 4
    assert _uuids(devices) == [["MIG-1", "MIG-2"]] * 2 + [[]] * 6 + [["MIG-1", "MIG-2"]] * 4
    # the failing kept handle makes the mode be read at once (20 s), then a minute later (80 s)
    assert mode_reads == [1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0]
    assert lookups == [7, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0]
    assert devices[3].utilization_ratio == 0.4  # MIG off: GPU utilisation is answered again
    assert devices[9].utilization_ratio is None and devices[9].mig[1].memory_used_bytes == 3 * GIB
    assert telemetry.view().errors_total == {}


def test_a_gpu_lost_in_its_instance_reads_is_enumerated_again_when_it_answers() -> None:
    sim = _mig_a100(_instance(1, 2), _instance(2, 3))
    lost = [False]

    def memory_info(handle: Any, **kwargs: Any) -> Any:
        if lost[0] and hasattr(handle, "slot"):  # a MIG handle
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return sim.nvmlDeviceGetMemoryInfo(handle, **kwargs)

    lib = Quirky(sim, override={"nvmlDeviceGetMemoryInfo": memory_info})
    source, _ = source_on(lib)
    assert len(source.collect(1000.0).devices[0].mig) == 2
    lost[0] = True
    assert not source.collect(1001.0).devices[0].up
    lost[0] = False
    before = sim.calls[HANDLE]
    device = source.collect(1002.0).devices[0]
    assert device.up and [m.uuid for m in device.mig] == ["MIG-1", "MIG-2"]
    assert sim.calls[HANDLE] - before == 7
