"""The join on hand-built snapshots: shared GPUs, MIG, multi-container pods, host processes,
idle allocations, energy shares and bounded state."""

from __future__ import annotations

import pytest
from msgspec.structs import replace

from falcon_gpu.attribution import joiner as joiner_module
from falcon_gpu.attribution.cgroup import CgroupIdentity
from falcon_gpu.attribution.chain import Chain
from falcon_gpu.attribution.device_ids import DeviceRef, parse_device_ids
from falcon_gpu.attribution.device_index import DeviceIndex
from falcon_gpu.attribution.joiner import Joiner
from falcon_gpu.attribution.kube_api import PodLabels
from falcon_gpu.attribution.logdirs import ContainerName, NameMaps, PodName
from falcon_gpu.attribution.podresources.client import KubeletAllocations
from falcon_gpu.attribution.source import Allocation
from falcon_gpu.attribution.sources.kubelet import KubeletView
from falcon_gpu.attribution.sources.logs import NameView
from falcon_gpu.attribution.sources.pod_labels import LabelView
from falcon_gpu.model.attribution import PodUsage
from falcon_gpu.model.snapshot import MigReading, Snapshot

from .helpers import GIB, chain_of, container_id, gpu, pod_uid, proc, snapshot

# (namespace, pod, container, pod number, container number)
ALICE = ("team-a", "jupyter-alice", "notebook", 1, 1)
BOB = ("team-a", "jupyter-bob", "notebook", 2, 2)
RENDER = ("team-b", "render-6f7c9", "render", 3, 3)
PRE = ("ml", "pipeline-0", "preprocess", 4, 4)
TRAIN = ("ml", "pipeline-0", "train", 4, 5)
IDLE = ("ml", "idle-reservation-0", "sleeper", 5, 6)
BERT0 = ("research", "bert-ft-0", "trainer", 6, 7)
BERT1 = ("research", "bert-ft-1", "trainer", 7, 8)
ALL = (ALICE, BOB, RENDER, PRE, TRAIN, IDLE, BERT0, BERT1)

PIDS = {101: ALICE, 102: BOB, 103: RENDER, 201: PRE, 202: TRAIN, 301: BERT0, 302: BERT1}
HOST_PID = 900

MIG1 = "MIG-11111111-0000-0000-0000-000000000000"
MIG2 = "MIG-22222222-0000-0000-0000-000000000000"


def identities() -> dict[int, CgroupIdentity | None]:
    out: dict[int, CgroupIdentity | None] = {
        pid: CgroupIdentity(pod_uid(c[3]), container_id(c[4])) for pid, c in PIDS.items()
    }
    out[HOST_PID] = None
    return out


def names() -> NameMaps:
    return NameMaps(
        pods={pod_uid(c[3]): PodName(c[0], c[1]) for c in ALL},
        containers={container_id(c[4]): ContainerName(c[0], c[1], c[2], pod_uid(c[3])) for c in ALL},
    )


def kubelet() -> KubeletAllocations:
    def alloc(c: tuple[str, str, str, int, int], resource: str, *ids: str) -> Allocation:
        return Allocation(c[0], c[1], c[2], resource, parse_device_ids(ids))

    g = [gpu(i).uuid for i in range(5)]
    return KubeletAllocations(
        allocations=(
            alloc(ALICE, "nvidia.com/gpu.shared", f"{g[0]}::0"),
            alloc(BOB, "nvidia.com/gpu.shared", f"{g[0]}::1"),
            alloc(RENDER, "nvidia.com/gpu.shared", f"{g[0]}::2", f"{g[0]}::3"),
            alloc(PRE, "nvidia.com/gpu", g[1]),
            alloc(TRAIN, "nvidia.com/gpu", "nvidia2"),  # GKE index form
            alloc(IDLE, "nvidia.com/gpu", g[3]),
            alloc(BERT0, "nvidia.com/mig-1g.10gb", MIG1),
            alloc(BERT1, "nvidia.com/mig-1g.10gb", "nvidia4/gi2"),  # GKE MIG form
        )
    )


def node(energy: tuple[float, float, float, float, float], scale: float = 1.0) -> Snapshot:
    return snapshot(
        gpu(
            0,
            (
                proc(101, 4, 0.30 * scale),
                proc(102, 3, 0.25 * scale),
                proc(103, 2, 0.20 * scale),
                proc(HOST_PID, 0.5, 0.05 * scale),
            ),
            energy=energy[0],
        ),
        gpu(1, (proc(201, 10, 0.5),), energy=energy[1]),
        gpu(2, (proc(202, 20, 0.9), proc(202, 1, 0.2)), energy=energy[2]),
        gpu(3, (), energy=energy[3]),
        gpu(
            4,
            (proc(302, 2, None, gpu_instance_id=2, compute_instance_id=0),),
            energy=energy[4],
            mig=(
                MigReading(1, 0, "1g.10gb", MIG1, processes=(proc(301, 5, None, gpu_instance_id=1),)),
                MigReading(2, 0, "1g.10gb", MIG2),
            ),
        ),
    )


def by_container(pods: tuple[PodUsage, ...]) -> dict[tuple[str, str, str, str, str | None], PodUsage]:
    return {
        (p.container.namespace, p.container.pod, p.container.container, p.gpu_uuid, p.mig_uuid): p
        for p in pods
    }


def key(
    c: tuple[str, str, str, int, int], index: int, mig: str | None = None
) -> tuple[str, str, str, str, str | None]:
    return (c[0], c[1], c[2], gpu(index).uuid, mig)


def test_every_container_gets_its_own_numbers() -> None:
    result = Joiner().join(
        node((1000, 1000, 1000, 1000, 1000)), identities(), chain_of(names(), kubelet(), None), 0.0
    )
    pods = by_container(result.attribution.pods)
    assert set(pods) == {
        key(ALICE, 0),
        key(BOB, 0),
        key(RENDER, 0),
        key(PRE, 1),
        key(TRAIN, 2),
        key(IDLE, 3),
        key(BERT0, 4, MIG1),
        key(BERT1, 4, MIG2),
    }
    alice = pods[key(ALICE, 0)]
    assert (alice.memory_used_bytes, alice.utilization_ratio, alice.processes) == (4 * GIB, 0.30, 1)
    assert alice.allocated and alice.resource == "nvidia.com/gpu.shared"
    assert alice.container.pod_uid == pod_uid(1)
    assert pods[key(BOB, 0)].memory_used_bytes == 3 * GIB
    assert pods[key(RENDER, 0)].utilization_ratio == pytest.approx(0.20)
    # a container with two entries on one GPU: memory summed, SM share capped at 1
    train = pods[key(TRAIN, 2)]
    assert (train.memory_used_bytes, train.utilization_ratio, train.processes) == (21 * GIB, 1.0, 2)
    assert train.resource == "nvidia.com/gpu"
    # one pod, two containers, two GPUs
    assert pods[key(PRE, 1)].container.pod == pods[key(TRAIN, 2)].container.pod == "pipeline-0"
    # MIG: one pod per instance, via the instance's own list and via the parent's list by instance id
    assert pods[key(BERT0, 4, MIG1)].memory_used_bytes == 5 * GIB
    assert pods[key(BERT1, 4, MIG2)].memory_used_bytes == 2 * GIB
    assert pods[key(BERT1, 4, MIG2)].resource == "nvidia.com/mig-1g.10gb"
    # the allocated pod that never runs anything
    idle = pods[key(IDLE, 3)]
    assert (idle.allocated, idle.processes, idle.memory_used_bytes) == (True, 0, 0)
    # the host process outside Kubernetes
    unattributed = {(u.gpu_uuid, u.mig_uuid): u for u in result.attribution.unattributed}
    host = unattributed[(gpu(0).uuid, None)]
    assert (host.processes, host.memory_used_bytes, host.utilization_ratio) == (1, GIB // 2, 0.05)
    assert set(unattributed) == {(gpu(i).uuid, None) for i in range(5)} | {
        (gpu(4).uuid, MIG1),
        (gpu(4).uuid, MIG2),
    }
    assert (result.in_pod, result.attributed, result.misses) == (8, 8, frozenset())


def test_pods_plus_unattributed_equal_device_totals() -> None:
    snap = node((1000, 1000, 1000, 1000, 1000))
    result = Joiner().join(snap, identities(), chain_of(names(), kubelet(), None), 0.0)
    for dev in snap.devices:
        procs = list(dev.processes) + [p for m in dev.mig for p in m.processes]
        pods = [p for p in result.attribution.pods if p.gpu_uuid == dev.uuid]
        unattr = [u for u in result.attribution.unattributed if u.gpu_uuid == dev.uuid]
        assert sum(p.memory_used_bytes for p in pods) + sum(u.memory_used_bytes or 0 for u in unattr) == (
            dev.memory_used_bytes
        )
        assert sum(p.processes for p in pods) + sum(u.processes for u in unattr) == len(procs)


def test_unattributed_memory_is_the_device_minus_its_pods() -> None:
    """Driver overhead and memory outside every MIG instance are unattributed, so the sums are exact."""
    mig = (
        MigReading(1, 0, "1g.10gb", MIG1, memory_used_bytes=6 * GIB, processes=(proc(301, 5, None),)),
        MigReading(2, 0, "1g.10gb", MIG2, memory_used_bytes=GIB // 4),
        MigReading(3, 0, "1g.10gb", "MIG-33333333-0000-0000-0000-000000000000"),  # no memory reading
    )
    snap = snapshot(
        gpu(0, (proc(101, 4, 0.3), proc(HOST_PID, 0.5, 0.05)), used=5 * GIB),
        gpu(3, (), used=None),  # no memory reading at all: absent, not 0
        gpu(4, (proc(302, 2, None, gpu_instance_id=2, compute_instance_id=0),), mig=mig, used=9 * GIB),
        gpu(1, (proc(201, 10, 0.5),), used=9 * GIB),  # processes report more than the device: never < 0
    )
    result = Joiner().join(snap, identities(), chain_of(names(), kubelet(), None), 0.0)
    unattr = {(u.gpu_uuid, u.mig_uuid): u.memory_used_bytes for u in result.attribution.unattributed}
    assert unattr == {
        (gpu(0).uuid, None): GIB // 2 + GIB // 2,  # the host process + 0.5 GiB no process reports
        (gpu(3).uuid, None): None,
        (gpu(4).uuid, MIG1): GIB,  # 6 GiB used, 5 GiB of them bert-ft-0's
        (gpu(4).uuid, MIG2): 0,  # bert-ft-1's 2 GiB exceed the instance's reading: clamped at 0
        (gpu(4).uuid, "MIG-33333333-0000-0000-0000-000000000000"): None,
        (gpu(4).uuid, None): 9 * GIB - 7 * GIB - GIB,  # outside every instance
        (gpu(1).uuid, None): 0,
    }


def test_energy_is_shared_by_sm_and_adds_up() -> None:
    joiner = Joiner()
    lookups = chain_of(names(), kubelet(), None)
    first = joiner.join(node((1000, 50, 70, 10, 500)), identities(), lookups, 0.0)
    # first reading: baseline only; MIG pods have no SM share to share energy by: absent
    assert {
        p.container.pod: p.energy_joules_total for p in first.attribution.pods if p.gpu_uuid == gpu(4).uuid
    } == {
        "bert-ft-0": None,
        "bert-ft-1": None,
    }
    assert all(p.energy_joules_total == 0 for p in first.attribution.pods if p.gpu_uuid != gpu(4).uuid)
    second = joiner.join(node((1100, 150, 70, 40, 600)), identities(), lookups, 30.0)
    pods = by_container(second.attribution.pods)
    # GPU 0: delta 100 J, SM shares .30/.25/.20/.05 of .80
    assert pods[key(ALICE, 0)].energy_joules_total == pytest.approx(37.5)
    assert pods[key(BOB, 0)].energy_joules_total == pytest.approx(31.25)
    assert pods[key(RENDER, 0)].energy_joules_total == pytest.approx(25.0)
    unattr = {(u.gpu_uuid, u.mig_uuid): u for u in second.attribution.unattributed}
    assert unattr[(gpu(0).uuid, None)].energy_joules_total == pytest.approx(6.25)
    assert pods[key(PRE, 1)].energy_joules_total == pytest.approx(100.0)  # sole user
    # idle GPU and MIG GPU without SM samples: everything stays unattributed
    assert pods[key(IDLE, 3)].energy_joules_total == 0.0
    assert unattr[(gpu(3).uuid, None)].energy_joules_total == pytest.approx(30.0)
    assert unattr[(gpu(4).uuid, None)].energy_joules_total == pytest.approx(100.0)
    deltas = [100.0, 100.0, 0.0, 30.0, 100.0]
    for i, delta in enumerate(deltas):
        total = sum(
            p.energy_joules_total or 0.0 for p in second.attribution.pods if p.gpu_uuid == gpu(i).uuid
        )
        total += sum(
            u.energy_joules_total for u in second.attribution.unattributed if u.gpu_uuid == gpu(i).uuid
        )
        assert total == pytest.approx(delta)
    # a counter that goes backwards (driver reload) only resets the baseline
    third = joiner.join(node((5, 150, 70, 40, 600)), identities(), lookups, 60.0)
    assert by_container(third.attribution.pods)[key(ALICE, 0)].energy_joules_total == pytest.approx(37.5)
    # a missing reading keeps the baseline: the next delta covers both cycles
    joiner.join(node((None, 150, 70, 40, 600)), identities(), lookups, 90.0)  # type: ignore[arg-type]
    fifth = joiner.join(node((85, 150, 70, 40, 600)), identities(), lookups, 120.0)
    assert by_container(fifth.attribution.pods)[key(ALICE, 0)].energy_joules_total == pytest.approx(
        37.5 + 30.0
    )


def test_allocation_idle_seconds_grow_until_used() -> None:
    joiner = Joiner()
    lookups = chain_of(names(), kubelet(), None)
    idle_at = [
        by_container(joiner.join(node((0,) * 5), identities(), lookups, t).attribution.pods)[key(IDLE, 3)]
        for t in (100.0, 130.0, 160.0)
    ]
    assert [p.allocation_idle_seconds for p in idle_at] == [0.0, 30.0, 60.0]
    ids = identities()
    ids[401] = CgroupIdentity(pod_uid(IDLE[3]), container_id(IDLE[4]))
    busy = node((0,) * 5)
    busy = Snapshot(
        busy.timestamp, True, devices=(*busy.devices[:3], gpu(3, (proc(401, 1, 0.1),)), busy.devices[4])
    )
    used = by_container(joiner.join(busy, ids, lookups, 190.0).attribution.pods)[key(IDLE, 3)]
    assert (used.allocation_idle_seconds, used.processes) == (0.0, 1)
    again = by_container(joiner.join(node((0,) * 5), identities(), lookups, 250.0).attribution.pods)[
        key(IDLE, 3)
    ]
    assert again.allocation_idle_seconds == 60.0
    assert (
        by_container(joiner.join(node((0,) * 5), identities(), lookups, 250.0).attribution.pods)[
            key(ALICE, 0)
        ].allocation_idle_seconds
        == 0.0
    )


def test_without_kubelet_pods_are_seen_running_not_allocated() -> None:
    result = Joiner().join(node((0,) * 5), identities(), chain_of(names(), None, None), 0.0)
    pods = by_container(result.attribution.pods)
    assert key(IDLE, 3) not in pods
    assert all(not p.allocated and p.resource is None for p in pods.values())
    assert pods[key(ALICE, 0)].memory_used_bytes == 4 * GIB


def test_unknown_container_is_a_miss_and_unattributed() -> None:
    ids = identities()
    ids[101] = CgroupIdentity(pod_uid(99), container_id(99))
    result = Joiner().join(node((0,) * 5), ids, chain_of(names(), kubelet(), None), 0.0)
    assert result.misses == {container_id(99)}
    assert (result.in_pod, result.attributed) == (8, 7)
    unattr = {(u.gpu_uuid, u.mig_uuid): u for u in result.attribution.unattributed}
    assert unattr[(gpu(0).uuid, None)].processes == 2
    alice = by_container(result.attribution.pods)[key(ALICE, 0)]
    assert (alice.processes, alice.allocated) == (0, True)


def test_known_pod_unknown_container_uses_the_single_gpu_container() -> None:
    ids = identities()
    ids[101] = CgroupIdentity(pod_uid(ALICE[3]), container_id(77))  # no log file for this container yet
    result = Joiner().join(node((0,) * 5), ids, chain_of(names(), kubelet(), None), 0.0)
    assert by_container(result.attribution.pods)[key(ALICE, 0)].processes == 1
    assert result.misses == frozenset()


def test_pod_level_process_of_a_pod_with_several_gpu_containers_is_a_miss() -> None:
    ids = identities()
    ids[201] = CgroupIdentity(pod_uid(PRE[3]), None)  # pipeline-0 has two GPU containers
    result = Joiner().join(node((0,) * 5), ids, chain_of(names(), kubelet(), None), 0.0)
    assert result.misses == {pod_uid(PRE[3])}
    assert by_container(result.attribution.pods)[key(PRE, 1)].processes == 0


def test_process_metrics_carry_the_container() -> None:
    result = Joiner(process_metrics=True).join(
        node((0,) * 5), identities(), chain_of(names(), kubelet(), None), 0.0
    )
    by_pid = {p.pid: p for p in result.attribution.processes}
    assert by_pid[101].container is not None and by_pid[101].container.pod == "jupyter-alice"
    assert by_pid[HOST_PID].container is None
    assert by_pid[301].mig_uuid == MIG1 and by_pid[302].mig_uuid == MIG2
    assert by_pid[101].memory_used_bytes == 4 * GIB and by_pid[101].command == "p101"


def test_state_is_bounded_as_pods_come_and_go() -> None:
    joiner = Joiner(retention=600.0)
    for i in range(2000):
        uid, cid = pod_uid(1000 + i), container_id(1000 + i)
        lookups = chain_of(
            NameMaps(
                {uid: PodName("batch", f"job-{i}")}, {cid: ContainerName("batch", f"job-{i}", "main", uid)}
            ),
            KubeletAllocations(
                (Allocation("batch", f"job-{i}", "main", "nvidia.com/gpu", parse_device_ids([gpu(0).uuid])),)
            ),
            None,
        )
        snap = snapshot(gpu(0, (proc(5000 + i, 1, 0.5),), energy=float(i * 10)))
        joiner.join(snap, {5000 + i: CgroupIdentity(uid, cid)}, lookups, float(i * 30))
    # 600 s retention at 30 s per pod: about 20 pods' counters left, not 2000
    assert len(joiner.energy) <= 25
    assert len(joiner.idle) == 1


def test_gke_device_node_names_follow_the_minor_number_not_the_nvml_index() -> None:
    """NVML orders GPUs by PCI bus, the kernel numbers /dev/nvidia<N> by probe order:
    GKE's ``nvidia0`` is the GPU whose minor is 0, whatever its NVML index."""
    swapped = snapshot(replace(gpu(0), minor_number=1), replace(gpu(1), minor_number=0), gpu(2))
    index = DeviceIndex(swapped)
    assert index.resolve(DeviceRef(gpu_index=0)) == (gpu(1).uuid, None)
    assert index.resolve(DeviceRef(gpu_index=1)) == (gpu(0).uuid, None)
    assert index.resolve(DeviceRef(gpu_index=2)) == (gpu(2).uuid, None)  # no minor known: the index


class CountingLabels(LabelView):
    """The kube_api view, counting how often the join asks it for a pod's labels."""

    def __init__(self, labels: PodLabels) -> None:
        super().__init__(labels)
        self.asked = 0

    def labels(self, pod_uid: str | None, pod: tuple[str, str]) -> tuple[tuple[str, str], ...] | None:
        self.asked += 1
        return super().labels(pod_uid, pod)


def labelled(team: str) -> tuple[Chain, CountingLabels]:
    view = CountingLabels(PodLabels(by_uid={pod_uid(ALICE[3]): (("label_team", team),)}, by_name={}))
    return Chain((KubeletView(kubelet()), NameView(names()), view)), view


def test_container_names_and_labels_are_looked_up_once_per_chain_not_per_cycle() -> None:
    joiner = Joiner()
    chain, view = labelled("red")
    for cycle in range(3):
        result = joiner.join(node((1000.0 * (cycle + 1),) * 5), identities(), chain, 30.0 * cycle)
        assert by_container(result.attribution.pods)[key(ALICE, 0)].container.labels == (
            ("label_team", "red"),
        )
    assert view.asked == 8  # the 8 containers, once each, in the first cycle only
    # a refresh builds a new chain: what it says now is what the next cycle reports
    chain, view = labelled("blue")
    result = joiner.join(node((4000.0,) * 5), identities(), chain, 90.0)
    assert by_container(result.attribution.pods)[key(ALICE, 0)].container.labels == (("label_team", "blue"),)
    assert view.asked == 8


def test_the_names_kept_for_a_chain_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(joiner_module, "MAX_NAMED", 3)
    joiner = Joiner()
    chain, view = labelled("red")
    for cycle in range(3):
        result = joiner.join(node((1000.0 * (cycle + 1),) * 5), identities(), chain, 30.0 * cycle)
        assert len(result.attribution.pods) == 8
        assert by_container(result.attribution.pods)[key(ALICE, 0)].container.labels == (
            ("label_team", "red"),
        )
    assert view.asked > 8  # emptied when full, so asked again
    assert len(joiner._named.refs(chain)) <= 8
