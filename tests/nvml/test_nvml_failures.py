"""Failures the source must survive: a GPU lost mid-cycle, NVML that cannot start (backoff),
NVML that stops answering, a changing GPU count, and a library that misbehaves outright."""

from __future__ import annotations

import logging
import os
import subprocess
from typing import Any

import pynvml
import pytest

from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.sources.nvml.library import load_nvml
from falcon_gpu.sources.nvml.session import MAX_DELAY_S
from falcon_gpu.sources.nvml.xid import XidWatcher
from tests.nvml.helpers import FakeClock, Quirky, gpu, raising, scenario_named, scenario_of, source_on


class LosingLib(Quirky):
    """Device ``victim`` answers GPU_IS_LOST once ``armed``; arms itself when ``trigger``
    is called on the victim (so the loss happens half-way through its readers)."""

    def __init__(self, sim: SimulatedNvml, victim: int, trigger: str) -> None:
        super().__init__(sim)
        self.victim = victim
        self.trigger = trigger
        self.armed = False
        self.enabled = False

    def __getattr__(self, name: str) -> Any:
        fn = super().__getattr__(name)
        if not callable(fn) or not name.startswith("nvmlDevice") or name == "nvmlDeviceGetCount":
            return fn

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            handle = args[0] if args else None
            is_victim = getattr(handle, "index", None) == self.victim
            if is_victim and self.enabled and name == self.trigger:
                self.armed = True
            if is_victim and self.armed:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
            return fn(*args, **kwargs)

        return wrapped


def test_gpu_lost_mid_cycle_others_still_read(caplog: pytest.LogCaptureFixture) -> None:
    scenario = scenario_named("mixed-4gpu")
    lib = LosingLib(SimulatedNvml(scenario), victim=1, trigger="nvmlDeviceGetClockInfo")
    source, telemetry = source_on(lib)
    before = source.collect(1000.0)
    assert all(d.up for d in before.devices)
    lib.enabled = True
    with caplog.at_level(logging.INFO, logger="falcon_gpu"):
        for t in range(2):
            snap = source.collect(1030.0 + 30 * t)
            lost = snap.devices[1]
            assert not lost.up and "GPU is lost" in (lost.error or "")
            assert (lost.index, lost.uuid, lost.name, lost.pci_bus_id) == (
                1,
                scenario.gpus[1].uuid,
                scenario.gpus[1].name,
                scenario.gpus[1].pci_bus_id,
            )
            assert lost.power_watts is None and lost.memory_used_bytes is None  # nothing half-read is kept
            for i in (0, 2, 3):
                device = snap.devices[i]
                assert (
                    device.up
                    and device.memory_total_bytes == scenario.gpus[i].values["memory_total_bytes"][0]
                )
                assert device.power_watts is not None
        assert telemetry.view().errors_total == {"gpu": 2}
        lib.armed = lib.enabled = False
        assert source.collect(1100.0).devices[1].up
    messages = [r.getMessage() for r in caplog.records]
    assert sum("is down" in m for m in messages) == 1
    assert sum("answers again" in m for m in messages) == 1


def test_gpu_lost_from_the_first_cycle_is_named_when_nvml_still_names_it() -> None:
    sim = SimulatedNvml(scenario_of(gpu(power_watts=5, lost_at_cycle=0), gpu("GPU-b", power_watts=6)))
    source, telemetry = source_on(sim)
    snap = source.collect(1000.0)
    assert not snap.devices[0].up and snap.devices[0].uuid == "GPU-a" and snap.devices[0].power_watts is None
    assert snap.devices[1].up and snap.devices[1].power_watts == 6
    assert telemetry.view().errors_total == {"gpu": 1}


def test_gpu_whose_handle_cannot_be_had_is_down_without_identity() -> None:
    sim = SimulatedNvml(scenario_of(gpu(power_watts=5), gpu("GPU-b", power_watts=6)))

    def handle(index: int) -> Any:
        if index == 0:
            raise pynvml.NVMLError(
                pynvml.NVML_ERROR_UNKNOWN
            )  # what real drivers answer for a GPU off the bus
        return sim.nvmlDeviceGetHandleByIndex(index)

    lib = Quirky(sim, override={"nvmlDeviceGetHandleByIndex": handle})
    source, telemetry = source_on(lib)
    for t in range(2):
        snap = source.collect(1000.0 + t)
        down = snap.devices[0]
        assert (down.up, down.index, down.uuid, down.name) == (False, 0, "", "")
        assert "Unknown Error" in (down.error or "")
        assert snap.devices[1].up and snap.devices[1].power_watts == 6
    assert lib.calls["nvmlDeviceGetHandleByIndex"] == 3  # retried each cycle; GPU-b's handle is cached
    assert telemetry.view().errors_total == {"gpu": 2}


def test_init_fails_then_recovers_on_the_backoff_schedule(caplog: pytest.LogCaptureFixture) -> None:
    sim = SimulatedNvml(scenario_of(gpu(power_watts=5)))
    sim.fail_init_times = 3
    clock = FakeClock(0.0)
    source, telemetry = source_on(sim, clock)
    attempts = []
    with caplog.at_level(logging.INFO, logger="falcon_gpu"):
        for now in (0.0, 0.5, 0.99, 1.0, 2.0, 2.9, 3.0, 6.9, 7.0, 8.0):
            clock.now = now
            snap = source.collect(now)
            attempts.append((now, sim.calls["nvmlInit"], snap.nvml_ok))
    assert attempts == [
        (0.0, 1, False),
        (0.5, 1, False),
        (0.99, 1, False),
        (1.0, 2, False),
        (2.0, 2, False),
        (2.9, 2, False),
        (3.0, 3, False),
        (6.9, 3, False),
        (7.0, 4, True),
        (8.0, 4, True),
    ]
    assert telemetry.view().errors_total == {"nvml_init": 3}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert (
        len(warnings) == 1
        and "NVML cannot start" in warnings[0]
        and "kernel driver is not loaded" in warnings[0]
    )
    assert sum(r.getMessage() == "NVML started" for r in caplog.records) == 1


def test_init_failure_snapshot_says_why_and_backoff_is_capped() -> None:
    sim = SimulatedNvml(scenario_of(gpu()))
    sim.fail_init_times = 100
    sim.init_error = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    clock = FakeClock(0.0)
    source, telemetry = source_on(sim, clock)
    snap = source.collect(0.0)
    assert not snap.nvml_ok and snap.devices == ()
    assert snap.nvml_error is not None and "libnvidia-ml.so.1" in snap.nvml_error
    gaps = []
    last = sim.calls["nvmlInit"]
    attempt_at = 0.0
    for second in range(1, 3000):
        clock.now = float(second)
        source.collect(clock.now)
        if sim.calls["nvmlInit"] != last:
            gaps.append(clock.now - attempt_at)
            attempt_at, last = clock.now, sim.calls["nvmlInit"]
    assert gaps[:9] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert set(gaps[9:]) == {MAX_DELAY_S}
    assert telemetry.view().errors_total["nvml_init"] == sim.calls["nvmlInit"]


def test_non_nvml_exception_from_init_is_contained() -> None:
    sim = SimulatedNvml(scenario_of(gpu()))

    def boom() -> None:
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    source, telemetry = source_on(Quirky(sim, override={"nvmlInit": boom}))
    snap = source.collect(0.0)
    assert not snap.nvml_ok and "cannot open shared object file" in (snap.nvml_error or "")
    assert telemetry.view().errors_total == {"nvml_init": 1}


def test_nvml_stops_answering_then_is_initialised_again() -> None:
    sim = SimulatedNvml(scenario_of(gpu(power_watts=5)))
    lib = Quirky(sim)
    clock = FakeClock(0.0)
    source, telemetry = source_on(lib, clock)
    assert source.collect(0.0).nvml_ok
    lib.override["nvmlDeviceGetCount"] = raising(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    clock.now = 30.0
    snap = source.collect(30.0)
    assert not snap.nvml_ok and "Driver Not Loaded" in (snap.nvml_error or "")
    assert not sim.initialized  # shut down so that the next init starts clean
    lib.override.clear()
    clock.now = 30.5
    assert not source.collect(30.5).nvml_ok  # still waiting for the backoff
    clock.now = 31.0
    snap = source.collect(31.0)
    assert snap.nvml_ok and snap.devices[0].power_watts == 5
    assert sim.calls["nvmlInit"] == 2
    assert telemetry.view().errors_total == {"nvml_init": 1}


def test_a_library_that_raises_anything_never_breaks_collect() -> None:
    sim = SimulatedNvml(scenario_of(gpu()))

    def broken(*args: Any) -> Any:
        raise RuntimeError("binding bug")

    source, telemetry = source_on(Quirky(sim, override={"nvmlDeviceGetCount": broken}))
    snap = source.collect(5.0)
    assert snap.timestamp == 5.0 and not snap.nvml_ok and "binding bug" in (snap.nvml_error or "")
    assert telemetry.view().errors_total == {"nvml": 1}


def test_device_count_is_called_once_per_cycle_and_a_changed_count_looks_devices_up_again() -> None:
    sim = SimulatedNvml(scenario_of(gpu(power_watts=1), gpu("GPU-b", power_watts=2)))
    counts = iter([1, 1, 2, 2])

    def count() -> int:
        sim.nvmlDeviceGetCount()
        return next(counts)

    lib = Quirky(sim, override={"nvmlDeviceGetCount": count})
    source, _ = source_on(lib)
    seen = [[d.uuid for d in source.collect(float(t)).devices] for t in range(4)]
    assert seen == [["GPU-a"], ["GPU-a"], ["GPU-a", "GPU-b"], ["GPU-a", "GPU-b"]]
    assert lib.calls["nvmlDeviceGetCount"] == 4
    assert sim.calls["nvmlDeviceGetHandleByIndex"] == 3  # 1 at start, 2 after the change
    assert sim.calls["nvmlDeviceGetUUID"] == 3  # identity is cached too


def test_collect_never_starts_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the NVML source must never start a process")

    monkeypatch.setattr(subprocess, "Popen", forbidden)
    monkeypatch.setattr(os, "system", forbidden)
    monkeypatch.setattr(os, "posix_spawn", forbidden)
    for name in ("mixed-4gpu", "mig-node", "shared-gpu", "faulty-node"):
        source, _ = source_on(SimulatedNvml(scenario_named(name)))
        for t in range(3):
            assert source.collect(float(t)).nvml_ok
        source.close()


def test_real_pynvml_without_a_driver_is_a_value_not_a_crash() -> None:
    """On this (GPU-less) machine the real library cannot load: the agent must carry on."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:  # a machine with a driver: nothing to check here
        pynvml.nvmlShutdown()
        pytest.skip("NVML works on this machine")
    clock = FakeClock(0.0)
    source, telemetry = source_on(load_nvml(None), clock)
    snap = source.collect(0.0)
    assert not snap.nvml_ok and snap.devices == ()
    assert snap.nvml_error is not None and snap.nvml_error.startswith("NVML cannot start")
    xid = XidWatcher(load_nvml(None), telemetry)
    xid.drain_now()
    assert xid.counts() == {}
    xid.stop()
    source.close()
    assert telemetry.view().errors_total == {"nvml_init": 1, "xid": 1}
