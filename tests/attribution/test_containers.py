"""Plain containers outside Kubernetes (issue 13 item 2): the container ID from the cgroup path,
the name from the runtime's own files (real file layouts, read-only), the series through a real
Prometheus and the Open-Falcon schema; a host with Kubernetes and stray Docker containers
attributes both."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.attribution import AttributionSettings, Attributor
from falcon_gpu.attribution.runtime_cgroup import RuntimeContainer, parse_runtime_cgroup
from falcon_gpu.attribution.sources.containers import PODMAN_FILE
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.schemas import openfalcon
from falcon_gpu.settings import Settings
from tests.attribution.conftest import run_once_into
from tests.delivery.conftest import ManagedServer, prom_query

from .helpers import GIB, HostTree, container_id, gpu, pod_uid, proc, snapshot, train_pod_host

A, B, C, D = (f"{n:x}" * 64 for n in (10, 11, 12, 13))  # 64 hex digits each


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (f"0::/system.slice/docker-{A}.scope\n", RuntimeContainer("docker", A)),
        (f"12:memory:/docker/{A}\n11:cpu:/docker/{A}\n0::/\n", RuntimeContainer("docker", A)),
        (f"0::/docker/{A}\n", RuntimeContainer("docker", A)),
        (f"0::/machine.slice/libpod-{B}.scope\n", RuntimeContainer("podman", B)),
        (f"0::/machine.slice/libpod-{B}.scope/container\n", RuntimeContainer("podman", B)),
        (
            f"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{B}.scope\n",
            RuntimeContainer("podman", B),
        ),
        (f"0::/machine.slice/libpod-conmon-{B}.scope\n", None),  # Podman's monitor, not the workload
        (f"0::/system.slice/nerdctl-{C}.scope\n", RuntimeContainer("containerd", C)),
        (f"4:memory:/default/{C}\n", RuntimeContainer("containerd", C, namespace="default")),
        (f"0::/default/{C}\n", RuntimeContainer("containerd", C, namespace="default")),
        (f"0::/libpod_parent/libpod-{B}\n", RuntimeContainer("podman", B)),
        ("0::/system.slice/sshd.service\n", None),
        ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
        ("garbage\n", None),
    ],
)
def test_the_runtime_and_container_id_come_from_the_cgroup_path(
    text: str, found: RuntimeContainer | None
) -> None:
    assert parse_runtime_cgroup(text) == found


def docker_container(root: Path, cid: str, name: str) -> Path:
    d = root / "containers" / cid
    d.mkdir(parents=True)
    (d / "config.v2.json").write_text(json.dumps({"ID": cid, "Name": "/" + name, "Config": {"Image": "x"}}))
    return d / "config.v2.json"


def podman_containers(root: Path, entries: list[dict[str, Any]]) -> None:
    path = root / PODMAN_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries))


def settings(tmp_path: Path, tree: HostTree) -> Settings:
    return Settings(
        proc_root=tree.proc,
        log_root=tree.log,
        kubelet_socket=tmp_path / "none.sock",
        docker_root=tmp_path / "docker",
        containers_root=tmp_path / "containers",
        passwd_file=tmp_path / "passwd",
        kubernetes="off",
        node="n1",
    )


def test_docker_and_podman_names_are_read_from_their_files_and_cached_by_id(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree = HostTree(tmp_path)
    tree.process(10, f"0::/system.slice/docker-{A}.scope\n")
    tree.process(11, f"0::/machine.slice/libpod-{B}.scope\n")
    tree.process(12, f"0::/system.slice/nerdctl-{C}.scope\n")
    tree.process(13, f"0::/system.slice/docker-{D}.scope\n")
    config = docker_container(tmp_path / "docker", A, "trainer")
    podman_containers(tmp_path / "containers", [{"id": B, "names": ["notebook"], "image": "x"}, {"id": 7}])
    snap = snapshot(gpu(0, (proc(10, 4, 0.5), proc(11, 2, 0.25), proc(12, 1, 0.0), proc(13, 1, 0.125))))
    telemetry = Telemetry()
    attributor = Attributor(AttributionSettings.of(settings(tmp_path, tree)), telemetry)
    try:
        attributor.refresh_now()
        first = attributor.attribute(snap)
        config.write_text(json.dumps({"Name": "/renamed"}))  # cached by ID: not read again
        docker_container(tmp_path / "docker", D, "late")  # a new one is
        attributor.refresh_now()
        second = attributor.attribute(snap)
        podman = tmp_path / "containers" / PODMAN_FILE
        podman.unlink()
        podman.mkdir()  # there, but not a readable file
        with caplog.at_level(logging.WARNING, logger="falcon_gpu"):
            attributor.refresh_now()
        third = attributor.attribute(snap)
    finally:
        attributor.close()
    rows = [
        (c.runtime, c.name, c.memory_used_bytes, c.utilization_ratio, c.processes) for c in first.containers
    ]
    assert (
        rows
        == [
            ("containerd", C[:12], 1 * GIB, 0.0, 1),  # containerd keeps no name file: its short ID
            ("docker", "trainer", 4 * GIB, 0.5, 1),
            ("docker", D[:12], 1 * GIB, 0.125, 1),  # not created yet at the first refresh
            ("podman", "notebook", 2 * GIB, 0.25, 1),
        ]
    )
    assert first.sources_ok == {"cgroup": True, "containers": True}
    assert [u.memory_used_bytes for u in first.unattributed] == [8 * GIB]  # a breakdown, still unattributed
    assert [c.name for c in second.containers] == [C[:12], "trainer", "late", "notebook"]
    assert third.sources_ok["containers"] is False
    assert [r.getMessage() for r in caplog.records if "containers_root" in r.getMessage()] == [
        f"cannot read {podman} (Is a directory): mount the host's containers storage read-only or set "
        "containers_root; Podman containers stay unnamed meanwhile"
    ]
    assert telemetry.view().errors_total["containers"] == 1
    assert [c.name for c in third.containers] == [C[:12], "trainer", "late", "notebook"]  # last names kept


def test_a_host_with_no_runtime_files_has_no_containers_source(tmp_path: Path) -> None:
    tree = HostTree(tmp_path)
    tree.process(10, f"0::/system.slice/docker-{A}.scope\n")
    attributor = Attributor(AttributionSettings.of(settings(tmp_path, tree)), Telemetry())
    try:
        attributor.refresh_now()
        result = attributor.attribute(snapshot(gpu(0, (proc(10, 1, 0.5),))))
        rows = {r[0]: r for r in attributor.diagnose(snapshot(gpu(0, (proc(10, 1, 0.5),))))}
    finally:
        attributor.close()
    assert result.sources_ok == {"cgroup": True}
    assert [(c.runtime, c.name) for c in result.containers] == [("docker", A[:12])]  # still broken down
    assert rows["container names (Docker, Podman)"][1] == "SKIP"


@pytest.mark.servers
def test_kubernetes_pods_and_stray_docker_and_podman_containers_are_all_attributed(
    prometheus: ManagedServer, tmp_path: Path
) -> None:
    gpu0 = "GPU-00000000-aaaa-bbbb-cccc-000000000000"
    uid, cid = pod_uid(1), container_id(1)
    host = train_pod_host(
        gpu0,
        uid,
        cid,
        {
            "5151": {"cgroup": f"0::/system.slice/docker-{A}.scope\n"},
            "5252": {"cgroup": f"0::/machine.slice/libpod-{B}.scope/container\n"},  # crun's layout
        },
        docker_containers=[{"id": A, "name": "stray-trainer"}],
        podman_containers=[{"id": B, "name": "podman-eval"}],  # the simulator's containers.json
    )
    processes = [
        {
            "pid": 4242,
            "name": "python",
            "type": "compute",
            "used_memory_bytes": 10 * GIB,
            "sm_util_percent": 60,
        },
        {
            "pid": 5151,
            "name": "python",
            "type": "compute",
            "used_memory_bytes": 5 * GIB,
            "sm_util_percent": 30,
        },
        {
            "pid": 5252,
            "name": "python",
            "type": "compute",
            "used_memory_bytes": 2 * GIB,
            "sm_util_percent": 10,
        },
    ]
    gpus = [
        {
            "uuid": gpu0,
            "name": "NVIDIA H100 80GB HBM3",
            "memory_total_bytes": 80 * GIB,
            "memory_used_bytes": 18 * GIB,
            "energy_joules": [1000, 1900],
            "processes": processes,
        }
    ]
    scenario = tmp_path / "mixed.json"
    scenario.write_text(
        json.dumps({"driver_version": "570.86.15", "cuda_version": "12.8", "gpus": gpus, "host": host})
    )
    run_once_into(prometheus, scenario, "mixed-node")

    def values(metric: str) -> dict[str, float]:
        found = prom_query(prometheus, f'{metric}{{node="mixed-node"}}')
        return {r["metric"].get("pod", r["metric"].get("container", "")): float(r["value"][1]) for r in found}

    assert values("falcon_gpu_pod_memory_used_bytes") == {"train-0": 10 * GIB}
    info = prom_query(prometheus, 'falcon_gpu_container_info{node="mixed-node"}')
    assert sorted(
        (r["metric"]["container"], r["metric"]["runtime"], r["metric"]["container_id"]) for r in info
    ) == [("podman-eval", "podman", B), ("stray-trainer", "docker", A)]
    assert values("falcon_gpu_container_memory_used_bytes") == {
        "stray-trainer": 5 * GIB,
        "podman-eval": 2 * GIB,
    }
    assert values("falcon_gpu_container_utilization_ratio") == {"stray-trainer": 0.3, "podman-eval": 0.1}
    assert values("falcon_gpu_container_processes") == {"stray-trainer": 1, "podman-eval": 1}
    assert values("falcon_gpu_unattributed_memory_used_bytes") == {"": 8 * GIB}  # 18 - the pod's 10


def test_open_falcon_items_for_plain_containers(tmp_path: Path) -> None:
    tree = HostTree(tmp_path)
    tree.process(10, f"0::/system.slice/docker-{A}.scope\n")
    docker_container(tmp_path / "docker", A, "trainer")
    attributor = Attributor(AttributionSettings.of(settings(tmp_path, tree)), Telemetry())
    snap = snapshot(gpu(3, (proc(10, 2, 0.42),)))
    try:
        attributor.refresh_now()
        att = attributor.attribute(snap)
    finally:
        attributor.close()
    cycle = CycleData(
        node="n1", step=60, snapshot=snap, attribution=att, health={}, telemetry=Telemetry().view()
    )
    items = {
        (i.metric, i.tags): i.value for i in openfalcon.render(cycle) if i.metric.startswith("Container")
    }
    assert items == {
        ("ContainerGPUUtils", "GpuId=3,container=trainer"): 42.0,
        ("ContainerFBUsed", "GpuId=3,container=trainer"): 2048.0,
    }


def test_a_plain_container_gets_its_energy_share_inside_the_unattributed() -> None:
    from falcon_gpu.attribution.chain import Chain
    from falcon_gpu.attribution.joiner import Joiner

    joiner = Joiner()
    plain = {10: RuntimeContainer("docker", A), 11: None}
    for energy in (1000.0, 1100.0):  # 100 J used: 0.6 / (0.6 + 0.2) to the container
        snap = snapshot(gpu(0, (proc(10, 1, 0.6), proc(11, 1, 0.2)), energy=energy))
        result = joiner.join(snap, {10: None, 11: None}, Chain(), 0.0, None, plain)
    (box,) = result.attribution.containers
    (rest,) = result.attribution.unattributed
    assert (box.name, box.processes, box.energy_joules_total) == (A[:12], 1, pytest.approx(75.0))
    assert (rest.processes, rest.energy_joules_total) == (2, pytest.approx(100.0))  # the container's included
