"""Job records keep what advice needs: the workload, p95 memory and p95 SM activity (GPM where the
container is alone on a GPU that has it)."""

from __future__ import annotations

from pathlib import Path

from falcon_gpu.model.attribution import ContainerRef, PodUsage
from falcon_gpu.model.snapshot import DeviceReading, GpmReading
from tests.jobs.helpers import UUID, Feeder, use

GIB = 1 << 30


def gpm_device(sm_active: float) -> DeviceReading:
    return DeviceReading(index=0, uuid=UUID, name="NVIDIA H100 80GB HBM3", pci_bus_id="00000000:18:00.0",
                         utilization_ratio=0.9, gpm=GpmReading(sm_active=sm_active))  # fmt: skip


def test_p95_memory_and_sm_of_a_job(tmp_path: Path) -> None:
    feed = Feeder(tmp_path)
    for i in range(20):  # 19 cycles at 4 GiB / 20 %, one at 10 GiB / 90 %
        peak = i == 7
        feed.cycle([use("trainer", memory=(10 if peak else 4) * GIB, util=0.9 if peak else 0.2)])
    (record,) = feed.cycle([]).finished
    assert record.memory_max_bytes == 10 * GIB
    assert 4 * GIB <= record.memory_p95_bytes <= 4 * GIB * 1.02
    assert record.sm_active_p95_ratio == 0.2
    assert record.workload == "train"  # pod train-0: the StatefulSet ordinal is dropped


def test_gpm_sm_activity_where_the_container_is_alone(tmp_path: Path) -> None:
    feed = Feeder(tmp_path)
    for _ in range(3):  # the process utilisation says 80 %, GPM says the SMs were active 30 %
        feed.cycle([use("solo", util=0.8)], devices=[gpm_device(0.3)])
    (alone,) = feed.cycle([], devices=[gpm_device(0.3)]).finished
    assert alone.sm_active_p95_ratio == 0.3 and alone.utilization_mean_ratio == 0.8
    two = [use("a", util=0.5, pod="p-0"), use("b", util=0.25, pod="q-0")]
    for _ in range(3):  # two containers share the GPU: GPM cannot tell them apart, their shares can
        feed.cycle(two, devices=[gpm_device(0.3)])
    shared = {r.container: r.sm_active_p95_ratio for r in feed.cycle([], devices=[gpm_device(0.3)]).finished}
    assert shared == {"a": 0.5, "b": 0.25}


def test_the_controller_is_the_workload(tmp_path: Path) -> None:
    feed = Feeder(tmp_path)
    owned = PodUsage(ContainerRef("ml", "trainer-a", "main", owner="trainer"), gpu_uuid=UUID, processes=1)
    feed.cycle([owned])
    (record,) = feed.cycle([]).finished
    assert record.workload == "trainer"
