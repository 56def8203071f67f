"""Every bundled scenario, read through the real NVML source: the snapshot equals the scenario
(units converted) cycle by cycle, including processes, MIG instances, lost GPUs and XIDs."""

from __future__ import annotations

import pytest
from msgspec.structs import asdict

from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.simulator.scenario.parse import at
from falcon_gpu.sources.nvml.source import NvmlSource
from falcon_gpu.sources.nvml.xid import XidWatcher
from tests.nvml.helpers import (
    FakeClock,
    expected_device,
    expected_gpm,
    expected_processes,
    scenario_named,
    source_on,
)

BUNDLED = ("mixed-4gpu", "mig-node", "shared-gpu", "faulty-node", "job-node")
CYCLES = 4


@pytest.mark.parametrize("name", BUNDLED)
def test_snapshot_equals_the_scenario_every_cycle(name: str) -> None:
    scenario = scenario_named(name)
    sim = SimulatedNvml(scenario)
    clock = FakeClock()
    telemetry = Telemetry()
    xid = XidWatcher(sim, telemetry)
    source = NvmlSource(sim, telemetry, clock=clock, xid=xid)
    for cycle in range(CYCLES):
        snap = source.collect(clock.now)
        clock.now += 30
        assert snap.nvml_ok and snap.nvml_error is None
        assert (snap.driver_version, snap.cuda_version) == (scenario.driver_version, scenario.cuda_version)
        assert [d.index for d in snap.devices] == list(range(len(scenario.gpus)))
        for gpu, device in zip(scenario.gpus, snap.devices, strict=True):
            xids: dict[int, int] = {}
            for event in gpu.xid_events:
                if event.cycle <= cycle:
                    xids[event.xid] = xids.get(event.xid, 0) + 1
            assert device.xid_counts == xids, (name, cycle, gpu.uuid)
            if gpu.lost_at_cycle is not None and cycle >= gpu.lost_at_cycle:
                assert not device.up and "GPU is lost" in (device.error or "")
                assert (device.uuid, device.name, device.pci_bus_id) == (gpu.uuid, gpu.name, gpu.pci_bus_id)
                assert device.power_watts is None and device.processes == ()
                continue
            assert device.up and device.error is None
            actual = asdict(device)
            for key, value in expected_device(gpu, cycle).items():
                assert actual[key] == (pytest.approx(value) if isinstance(value, float) else value), (
                    name,
                    cycle,
                    gpu.uuid,
                    key,
                )
            want = expected_processes(gpu, cycle)
            got = {(p.pid, p.gpu_instance_id): p for p in device.processes}
            assert set(got) == set(want), (name, cycle, gpu.uuid)
            for key, proc in got.items():
                assert proc.name == want[key]["name"]
                assert set(proc.types) == set(want[key]["types"])
                assert proc.used_memory_bytes == want[key]["used_memory_bytes"]
                assert proc.sm_util_ratio == pytest.approx(want[key]["sm_util_ratio"]), (name, cycle, key)
            assert len(device.mig) == len(gpu.mig)
            for mig, reading in zip(gpu.mig, device.mig, strict=True):
                assert (reading.uuid, reading.profile) == (mig.uuid, mig.profile)
                assert (reading.gpu_instance_id, reading.compute_instance_id) == (
                    mig.gpu_instance_id,
                    mig.compute_instance_id,
                )
                assert reading.memory_total_bytes == at(mig.memory_total_bytes or (0,), cycle)
                assert reading.memory_used_bytes == at(mig.memory_used_bytes or (0,), cycle)
                assert {p.pid for p in reading.processes} == {p.pid for p in mig.processes}
                assert all(p.gpu_instance_id == mig.gpu_instance_id for p in reading.processes)
                assert reading.gpm == expected_gpm(mig.gpm if gpu.gpm is not None else None, cycle)
    lost = sum(1 for g in scenario.gpus if g.lost_at_cycle is not None and g.lost_at_cycle < CYCLES)
    errors = telemetry.view().errors_total
    assert errors.get("gpu", 0) == sum(
        CYCLES - g.lost_at_cycle for g in scenario.gpus if g.lost_at_cycle is not None
    )
    assert set(errors) <= ({"gpu"} if lost else set()), errors  # NOT_SUPPORTED is never an error
    xid.stop()
    source.close()
    assert not sim.initialized


def test_faulty_node_reads_every_fault() -> None:
    scenario = scenario_named("faulty-node")
    sim = SimulatedNvml(scenario)
    source, _ = source_on(sim)
    snaps = [source.collect(1000.0 + 30 * c) for c in range(3)]
    flaky, lost, old, falling = snaps[2].devices
    assert [s.devices[1].up for s in snaps] == [False, False, False] and lost.uuid == scenario.gpus[1].uuid
    assert [s.devices[3].up for s in snaps] == [True, True, False] and falling.memory_used_bytes is None
    assert (
        flaky.ecc is not None and flaky.ecc.corrected_volatile == 40 and flaky.ecc.uncorrected_aggregate == 1
    )
    assert [s.devices[0].ecc.corrected_aggregate for s in snaps if s.devices[0].ecc] == [120, 132, 160]
    assert flaky.clock_event_reasons == frozenset({"hw_thermal", "sw_power_cap"})
    assert flaky.retired_pages is not None and flaky.retired_pages.pending
    assert flaky.remapped_rows is not None and flaky.remapped_rows.pending
    assert flaky.pcie_replays == 12
    assert old.inforom_valid is False and old.energy_joules is None and old.ecc is None
    assert old.processes[0].types == ("graphics",) and old.processes[0].sm_util_ratio is None
