"""SimulatedHost lays out a node the real readers can read, and cleans up after itself."""

from __future__ import annotations

import os
from pathlib import Path

from falcon_gpu.attribution.cgroup import CgroupIdentity
from falcon_gpu.attribution.device_ids import DeviceRef
from falcon_gpu.attribution.logdirs import ContainerName, LogDirScanner, PodName
from falcon_gpu.attribution.pid_cache import PidCache
from falcon_gpu.attribution.podresources import PodResourcesClient
from falcon_gpu.simulator.node.layout import SimulatedHost
from falcon_gpu.simulator.scenario.host_model import (
    HostScenario,
    PodResourcesContainer,
    PodResourcesDevice,
    PodResourcesPod,
)

from .helpers import container_id, pod_uid, systemd_cgroup

UID, CID = pod_uid(1), container_id(1)
ORPHAN = container_id(2)


def scenario() -> HostScenario:
    return HostScenario(
        proc_cgroups={4242: systemd_cgroup(UID, CID).rstrip("\n"), 1: "0::/init.scope"},
        pod_resources=(
            PodResourcesPod(
                "ml",
                "train-0",
                (PodResourcesContainer("main", (PodResourcesDevice("nvidia.com/gpu", ("GPU-a",)),)),),
            ),
        ),
        log_containers=(f"train-0_ml_main-{CID}.log", f"gone-0_ml_main-{ORPHAN}.log"),
        log_pods=(f"ml_train-0_{UID}",),
        allocatable=(PodResourcesDevice("nvidia.com/gpu", ("GPU-a", "GPU-b")),),
    )


def test_layout_is_read_by_the_real_readers(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 60) / ("y" * 60)  # too deep for a unix socket path
    host = SimulatedHost(scenario(), deep)
    paths = host.start()
    try:
        assert paths.proc_root == deep / "proc"
        assert len(str(paths.kubelet_socket)) <= 100
        cgroups = PidCache(paths.proc_root)
        assert cgroups.lookup(4242) == CgroupIdentity(UID, CID)
        assert cgroups.lookup(1) is None
        maps = LogDirScanner(paths.log_root).scan()
        assert maps.pods == {UID: PodName("ml", "train-0")}
        assert maps.containers[CID] == ContainerName("ml", "train-0", "main", UID)  # via the link target
        assert maps.containers[ORPHAN] == ContainerName("ml", "gone-0", "main", None)  # plain file
        link = paths.log_root / "containers" / f"train-0_ml_main-{CID}.log"
        assert os.readlink(link) == str(paths.log_root / "pods" / f"ml_train-0_{UID}" / "main" / "0.log")
        client = PodResourcesClient(paths.kubelet_socket, ["nvidia.com/gpu"])
        got = client.fetch()
        client.close()
        assert [(a.pod, a.container, a.devices) for a in got.allocations] == [
            ("train-0", "main", (DeviceRef(gpu_uuid="GPU-a"),))
        ]
        assert len(got.allocatable) == 2
        assert host.start() is paths  # idempotent
    finally:
        host.stop()
    assert not paths.kubelet_socket.exists()
    assert not paths.kubelet_socket.parent.exists()  # the short socket dir was ours: removed
    assert deep.exists()  # the caller's directory is the caller's


def test_default_base_is_a_temporary_directory_removed_on_stop() -> None:
    host = SimulatedHost(scenario())
    paths = host.start()
    base = paths.proc_root.parent
    assert (base / "proc" / "4242" / "cgroup").read_text().endswith("\n")
    host.stop()
    assert not base.exists()
