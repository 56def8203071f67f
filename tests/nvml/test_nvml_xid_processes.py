"""XID events (drain and thread), process SM shares since the last sample, process names, MIG slots."""

from __future__ import annotations

import logging
import threading
import time
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.sources.nvml.readers.clocks import reasons_from_mask
from falcon_gpu.sources.nvml.readers.mig import profile_from_name
from falcon_gpu.sources.nvml.session import cuda_version_text
from falcon_gpu.sources.nvml.xid import XidWatcher
from tests.nvml.helpers import GIB, Quirky, gpu, raising, scenario_named, scenario_of, source_on


# -- XID -----------------------------------------------------------------------
def test_drain_now_counts_events_per_uuid_and_xid(caplog: pytest.LogCaptureFixture) -> None:
    scenario = scenario_named("faulty-node")
    sim = SimulatedNvml(scenario)
    sim.nvmlInit()
    telemetry = Telemetry()
    xid = XidWatcher(sim, telemetry)
    flaky, lost, falling = scenario.gpus[0].uuid, scenario.gpus[1].uuid, scenario.gpus[3].uuid
    history = []
    with caplog.at_level(logging.DEBUG, logger="falcon_gpu"):
        for _ in range(4):
            sim.nvmlDeviceGetCount()
            xid.drain_now()
            history.append(xid.counts())
    xid_logs = [r for r in caplog.records if r.getMessage().startswith("XID ")]
    assert len(xid_logs) == 4  # every event is logged, but only the first per (GPU, XID) as a warning
    assert [r.getMessage().split(" (")[0] for r in xid_logs if r.levelno == logging.WARNING] == [
        f"XID 79 on GPU {lost}",
        f"XID 48 on GPU {flaky}",
        f"XID 79 on GPU {falling}",
    ]
    assert history == [
        {lost: {79: 1}},  # lost from cycle 0: its XID 79 is still seen
        {flaky: {48: 1}, lost: {79: 1}, falling: {79: 1}},
        {flaky: {48: 2}, lost: {79: 1}, falling: {79: 1}},
        {flaky: {48: 2}, lost: {79: 1}, falling: {79: 1}},
    ]
    assert telemetry.view().errors_total == {}
    xid.stop()
    sim.nvmlShutdown()
    assert not sim.initialized  # the watcher released its own NVML reference


def test_watcher_thread_collects_events_while_cycles_run() -> None:
    scenario = scenario_named("faulty-node")
    sim = SimulatedNvml(scenario)
    telemetry = Telemetry()
    xid = XidWatcher(sim, telemetry, wait_ms=1000)
    source, _ = source_on(sim, xid=xid)
    source.collect(0.0)
    xid.start()
    xid.start()  # idempotent
    source.collect(30.0)
    source.collect(60.0)
    deadline = time.monotonic() + 10
    want = {scenario.gpus[0].uuid: {48: 2}, scenario.gpus[1].uuid: {79: 1}, scenario.gpus[3].uuid: {79: 1}}
    while xid.counts() != want and time.monotonic() < deadline:
        time.sleep(0.01)
    assert xid.counts() == want
    snap = source.collect(90.0)  # drain_now is a no-op while the thread runs
    assert snap.devices[0].xid_counts == {48: 2}
    assert snap.devices[1].xid_counts == {79: 1} and not snap.devices[1].up
    xid.stop()
    assert sim.calls["nvmlEventSetFree"] == 1


def test_watcher_survives_no_event_support_and_init_failure() -> None:
    sim = SimulatedNvml(
        scenario_of(gpu(not_supported=["xid_events"]), gpu("GPU-b", xid_events=[{"xid": 13}]))
    )
    sim.fail_init_times = 1
    telemetry = Telemetry()
    now = [0.0]
    xid = XidWatcher(sim, telemetry, clock=lambda: now[0])
    xid.drain_now()
    assert xid.counts() == {} and telemetry.view().errors_total == {"xid": 1}
    xid.drain_now()  # inside the backoff: no new attempt
    assert sim.calls["nvmlInit"] == 1
    now[0] = 1.0
    sim.nvmlInit()
    sim.nvmlDeviceGetCount()
    xid.drain_now()
    assert xid.counts() == {"GPU-b": {13: 1}}  # GPU-a could not register and is skipped
    xid.stop()


def test_event_wait_errors_are_counted_not_raised() -> None:
    sim = SimulatedNvml(scenario_of(gpu()))
    lib = Quirky(sim, override={"nvmlEventSetWait": raising(pynvml.NVML_ERROR_UNKNOWN)})
    telemetry = Telemetry()
    xid = XidWatcher(lib, telemetry)
    xid.drain_now()
    xid.drain_now()
    assert telemetry.view().errors_total == {"xid": 2}
    assert xid.counts() == {}
    xid.stop()


def test_a_gpu_lost_under_the_event_set_does_not_blind_the_watcher_to_the_others() -> None:
    """A real driver answers GPU_IS_LOST to every wait of a set that holds a lost GPU (and
    refuses to register it): the set must be freed and built again without that GPU."""
    sim = SimulatedNvml(scenario_of(gpu(), gpu("GPU-b", xid_events=[{"cycle": 2, "xid": 13}])))
    lost = [False]

    def register(handle: Any, types: int, event_set: Any) -> None:
        if lost[0] and handle.index == 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        sim.nvmlDeviceRegisterEvents(handle, types, event_set)

    def wait(event_set: Any, timeout_ms: int) -> Any:
        if lost[0] and any(dev.index == 0 for dev in event_set.devices):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return sim.nvmlEventSetWait(event_set, timeout_ms)

    lib = Quirky(sim, override={"nvmlDeviceRegisterEvents": register, "nvmlEventSetWait": wait})
    telemetry = Telemetry()
    now = [0.0]
    xid = XidWatcher(lib, telemetry, clock=lambda: now[0])
    sim.nvmlInit()  # the source's reference, so the test can advance cycles
    sim.nvmlDeviceGetCount()
    xid.drain_now()
    lost[0] = True
    sim.nvmlDeviceGetCount()
    xid.drain_now()
    assert telemetry.view().errors_total == {"xid": 1}
    assert sim.calls["nvmlEventSetFree"] == 1  # the poisoned set is released, not leaked
    # a drain has no later cycle to retry in: it builds the set again at once, without the lost GPU
    assert sim.calls["nvmlEventSetCreate"] == 2 and xid.counts() == {}
    sim.nvmlDeviceGetCount()
    xid.drain_now()
    assert xid.counts() == {"GPU-b": {13: 1}}  # the other GPU is watched again
    assert sim.calls["nvmlEventSetCreate"] == 2 and telemetry.view().errors_total == {"xid": 1}
    xid.stop()
    assert sim.calls["nvmlEventSetFree"] == 2
    sim.nvmlShutdown()


def test_driver_gone_under_the_wait_releases_the_watchers_nvml_reference() -> None:
    """NVML reopens the driver only once every nvmlInit is matched by a shutdown: the
    watcher must let go of its own reference, not keep a dead library alive."""
    sim = SimulatedNvml(scenario_of(gpu(xid_events=[{"xid": 31}])))
    gone = [True]

    def wait(event_set: Any, timeout_ms: int) -> Any:
        if gone[0]:
            gone[0] = False
            raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
        return sim.nvmlEventSetWait(event_set, timeout_ms)

    now = [0.0]
    xid = XidWatcher(Quirky(sim, override={"nvmlEventSetWait": wait}), Telemetry(), clock=lambda: now[0])
    xid.drain_now()
    assert not sim.initialized and sim.calls["nvmlEventSetFree"] == 1
    now[0] = 1.0
    sim.nvmlInit()  # the source's reference, so the test can start a cycle
    sim.nvmlDeviceGetCount()
    xid.drain_now()
    assert sim.calls["nvmlInit"] == 3 and xid.counts() == {"GPU-a": {31: 1}}
    xid.stop()
    sim.nvmlShutdown()
    assert not sim.initialized


def test_stop_does_not_hang_on_a_thread_stuck_in_nvml() -> None:
    sim = SimulatedNvml(scenario_of(gpu()))
    entered, release = threading.Event(), threading.Event()

    def wedged(event_set: Any, timeout_ms: int) -> Any:
        entered.set()
        release.wait(30)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)

    xid = XidWatcher(Quirky(sim, override={"nvmlEventSetWait": wedged}), Telemetry(), wait_ms=100)
    xid.start()
    assert entered.wait(10)
    stopper = threading.Thread(target=xid.stop, daemon=True)
    stopper.start()
    stopper.join(20)  # the join inside stop gives up after wait_ms + 2 s
    try:
        assert not stopper.is_alive()
        assert sim.calls["nvmlEventSetFree"] == 0  # never freed under the stuck wait
    finally:
        release.set()


# -- processes -------------------------------------------------------------------
def sample(pid: int, stamp: int, sm: int) -> SimpleNamespace:
    return SimpleNamespace(pid=pid, timeStamp=stamp, smUtil=sm, memUtil=0, encUtil=0, decUtil=0)


def test_sm_share_averages_new_samples_and_skips_seen_ones() -> None:
    procs = [
        {"pid": 1, "name": "a", "used_memory_bytes": GIB},
        {"pid": 2, "name": "b", "used_memory_bytes": GIB},
    ]
    sim = SimulatedNvml(scenario_of(gpu(processes=procs)))
    asked: list[int] = []
    answers: list[Any] = [
        [
            sample(1, 1_000_000_100, 20),
            sample(1, 1_000_000_200, 40),
            sample(2, 1_000_000_150, 90),
            sample(1, 1_000_000_180, 30),
        ],  # three samples of PID 1: their mean, 0.30
        [sample(1, 1_000_000_200, 40), sample(1, 1_030_000_500, 10)],  # the first one was already used
        pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND),
        pynvml.NVMLError(pynvml.NVML_SUCCESS),  # pynvml's way of saying "zero samples"
    ]

    def utilisation(handle: Any, last_seen: int) -> Any:
        asked.append(last_seen)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    source, telemetry = source_on(Quirky(sim, override={"nvmlDeviceGetProcessUtilization": utilisation}))
    shares = []
    for now in (1000.0, 1030.0, 1060.0, 1090.0):
        shares.append({p.pid: p.sm_util_ratio for p in source.collect(now).devices[0].processes})
    assert shares[0] == {1: pytest.approx(0.30), 2: pytest.approx(0.90)}
    assert shares[1] == {1: pytest.approx(0.10), 2: 0.0}  # no sample: no kernel ran, share 0
    assert shares[2] == {1: 0.0, 2: 0.0}  # NOT_FOUND: no new samples, not an error
    assert shares[3] == {1: 0.0, 2: 0.0}
    assert asked == [0, 1_000_000_200, 1_030_000_500, 1_060_000_000]
    assert telemetry.view().errors_total == {}


def test_last_seen_is_at_least_the_previous_cycle_time() -> None:
    sim = SimulatedNvml(scenario_of(gpu(processes=[{"pid": 1, "used_memory_bytes": 1}])))
    asked: list[int] = []

    def utilisation(handle: Any, last_seen: int) -> Any:
        asked.append(last_seen)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    source, _ = source_on(Quirky(sim, override={"nvmlDeviceGetProcessUtilization": utilisation}))
    source.collect(1000.0)
    source.collect(1030.0)
    assert asked == [0, 1_000_000_000]


def test_process_names_are_asked_once_per_pid_and_forgotten_when_it_exits() -> None:
    procs = [
        {"pid": 1, "name": "a", "used_memory_bytes": 1},
        {"pid": 2, "name": "b", "used_memory_bytes": 1},
        {"pid": 3, "used_memory_bytes": 1},  # NVML cannot name it (NOT_FOUND)
    ]
    sim = SimulatedNvml(scenario_of(gpu(processes=procs), gpu("GPU-b", processes=procs[:1])))
    lib = Quirky(sim)
    source, telemetry = source_on(lib)
    for t in range(3):
        names = {p.pid: p.name for p in source.collect(float(t)).devices[0].processes}
        assert names == {1: "a", 2: "b", 3: None}
    assert sim.calls["nvmlSystemGetProcessName"] == 3
    lib.override["nvmlDeviceGetComputeRunningProcesses_v3"] = lambda h: []
    source.collect(10.0)
    lib.override.clear()
    source.collect(11.0)
    assert sim.calls["nvmlSystemGetProcessName"] == 6  # looked up again after the PIDs went away
    assert telemetry.view().errors_total == {}


def test_mig_empty_slots_are_skipped_and_processes_carry_instances() -> None:
    scenario = scenario_named("mig-node")
    sim = SimulatedNvml(scenario)
    source, telemetry = source_on(sim)
    device = source.collect(0.0).devices[0]
    assert device.mig_enabled and [m.profile for m in device.mig] == [
        "1g.10gb",
        "1g.10gb",
        "2g.20gb",
        "3g.40gb",
    ]
    assert sim.calls["nvmlDeviceGetMigDeviceHandleByIndex"] == 7  # 3 empty slots answered NOT_FOUND
    assert {(p.pid, p.gpu_instance_id) for p in device.processes} == {(7001, 9), (7002, 10), (7003, 5)}
    # NVML has no per-process utilisation on MIG-enabled GPUs: memory yes, SM share no
    assert device.mig[0].processes[0].sm_util_ratio is None
    assert device.mig[0].processes[0].used_memory_bytes is not None
    assert device.utilization_ratio is None
    assert device.mig[3].processes == ()
    assert telemetry.view().errors_total == {}
    source.collect(30.0)
    assert sim.calls["nvmlDeviceGetMigDeviceHandleByIndex"] == 7  # the layout is kept within the minute
    source.collect(61.0)
    assert sim.calls["nvmlDeviceGetMigDeviceHandleByIndex"] == 14  # empty slots are not "not supported"


def test_mig_processes_only_on_instance_handles_are_added_to_the_device() -> None:
    scenario = scenario_named("mig-node")
    sim = SimulatedNvml(scenario)
    parent_lists = {"nvmlDeviceGetComputeRunningProcesses_v3"}

    def only_instances(handle: Any) -> Any:
        if hasattr(handle, "mig"):
            return sim.nvmlDeviceGetComputeRunningProcesses_v3(handle)
        return []  # an unprivileged parent list: empty under MIG

    lib = Quirky(sim, override={name: only_instances for name in parent_lists})
    source, _ = source_on(lib)
    device = source.collect(0.0).devices[0]
    assert {(p.pid, p.gpu_instance_id, p.compute_instance_id) for p in device.processes} == {
        (7001, 9, 0),
        (7002, 10, 0),
        (7003, 5, 0),
    }


def test_mig_placement_start_is_read_once_a_minute_and_quietly_unknown_without_privilege() -> None:
    """Two 1g.10gb instances on one GPU differ only by placement (what DRA device names carry)."""
    sim = SimulatedNvml(scenario_named("mig-node"))
    source, telemetry = source_on(sim)
    device = source.collect(0.0).devices[0]
    assert [(m.gpu_instance_id, m.placement_start) for m in device.mig] == [(9, 2), (10, 3), (5, 0), (1, 4)]
    source.collect(30.0)
    assert sim.calls["nvmlGpuInstanceGetInfo"] == 4  # with the slow fields, not every cycle

    def refused(*_: Any) -> Any:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)

    lib = Quirky(
        SimulatedNvml(scenario_named("mig-node")), override={"nvmlDeviceGetGpuInstanceById": refused}
    )
    source, telemetry = source_on(lib)
    device = source.collect(0.0).devices[0]
    assert [m.placement_start for m in device.mig] == [None] * 4
    assert telemetry.view().errors_total == {}  # an unprivileged agent: not an error, no log each cycle


# -- small pure helpers ------------------------------------------------------------
def test_pure_conversions() -> None:
    assert profile_from_name("NVIDIA A100-SXM4-40GB MIG 1g.5gb") == "1g.5gb"
    assert profile_from_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me") == "1g.10gb+me"
    assert profile_from_name("NVIDIA L4") == ""
    assert cuda_version_text(12040) == "12.4" and cuda_version_text(11080) == "11.8"
    assert reasons_from_mask(0) == frozenset()
    assert reasons_from_mask(0x1 | 0x4 | 0x100) == frozenset({"idle", "sw_power_cap", "display_clocks"})


@pytest.mark.parametrize("one_shot", [True, False])
def test_a_one_shot_cycle_counts_the_xid_raised_while_it_read_the_gpus(one_shot: bool) -> None:
    """Issue 20 item 1: the event is not there yet when the cycle starts (the first wait answers
    TIMEOUT) and is queued by the time the GPUs are read; a one-shot source drains again after the
    readings and counts it in that very cycle, a source with an event thread leaves it to the thread."""
    sim = SimulatedNvml(scenario_of(gpu("GPU-a", xid_events=[{"cycle": 0, "xid": 43}])))
    waits: list[int] = []

    def wait(event_set: Any, timeout_ms: int) -> Any:
        waits.append(timeout_ms)
        if len(waits) == 1:  # the drain before the readings: nothing raised yet
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        return sim.nvmlEventSetWait(event_set, timeout_ms)

    lib = Quirky(sim, override={"nvmlEventSetWait": wait})
    telemetry = Telemetry()
    xid = XidWatcher(lib, telemetry)
    source, _ = source_on(lib, xid=xid, one_shot=one_shot)
    device = source.collect(1000.0).devices[0]
    if one_shot:
        assert (device.xid_counts, device.last_xid) == ({43: 1}, 43)
        assert waits[0] == 0 and 0 < waits[1] <= 20  # the second drain waits, bounded
    else:
        assert (device.xid_counts, device.last_xid) == ({}, None) and waits == [0]
    xid.stop()
    source.close()
