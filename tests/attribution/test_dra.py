"""DRA (issue 13 item 1): GPUs claimed through ``gpu.nvidia.com`` reach ``falcon_gpu_pod_info``
with ``resource="dra:gpu.nvidia.com"``, ``claim_name`` and ``claim_namespace``, mapped by NVML minor
number and MIG profile with no API access; a device of an unknown driver is counted, logged once
and left unmapped. Through the simulator's real PodResources gRPC server and a real Prometheus."""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.attribution import AttributionSettings, Attributor
from falcon_gpu.attribution.device_ids import DeviceRef, dra_profile, parse_dra_device
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import Settings
from falcon_gpu.simulator.node.layout import SimulatedHost
from falcon_gpu.simulator.node.podresources_server import PodResourcesServer
from falcon_gpu.simulator.scenario.host_model import (
    PodResourcesClaim,
    PodResourcesClaimDevice,
    PodResourcesContainer,
    PodResourcesPod,
)
from falcon_gpu.simulator.scenario.parse import load_scenario
from tests.attribution.conftest import run_once_into
from tests.delivery.conftest import ManagedServer, prom_query

from .helpers import GIB, HostTree, container_id, gpu, pod_uid, proc, snapshot, systemd_cgroup

MIG_SMALL = "MIG-11111111-1111-1111-1111-111111111111"
MIG_BIG = "MIG-22222222-2222-2222-2222-222222222222"
GPU0 = "GPU-00000000-aaaa-bbbb-cccc-000000000000"
GPU1 = "GPU-11111111-aaaa-bbbb-cccc-111111111111"
DRA = "dra:gpu.nvidia.com"


@pytest.fixture
def socket_path() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fgpu-") as d:  # unix socket paths must stay short
        yield Path(d) / "kubelet.sock"


@pytest.mark.parametrize(
    ("name", "ref"),
    [
        ("gpu-0", DeviceRef(gpu_index=0)),
        ("gpu-12", DeviceRef(gpu_index=12)),
        ("gpu-3-mig-1g10gb-19-2", DeviceRef(gpu_index=3, mig_profile="1g10gb", mig_placement=2)),
        ("gpu-1-mig-1g10gb-me-20-6", DeviceRef(gpu_index=1, mig_profile="1g10gb-me", mig_placement=6)),
        ("gpu-vfio-0", None),  # a GPU passed through to a VM: no NVML device here
        ("gpu-x", None),
        ("nvidia0", None),
    ],
)
def test_nvidia_dra_device_names(name: str, ref: DeviceRef | None) -> None:
    assert parse_dra_device(name) == ref


def test_nvml_profiles_in_dra_spelling() -> None:
    assert [dra_profile(p) for p in ("1g.10gb", "1g.10gb+me", "7g.80gb", "3g.40gb")] == [
        "1g10gb",
        "1g10gb-me",
        "7g80gb",
        "3g40gb",
    ]


def scenario(tmp_path: Path) -> Path:
    """Two GPUs: GPU 0 split into a 1g.10gb and a 2g.20gb instance, GPU 1 whole; three pods
    claiming them through DRA, one claim also holding a device of another driver."""
    pods = [(1, "train-a", "main", 7001), (2, "serve-b", "srv", 7003), (3, "whole-c", "w", 8001)]

    def claim(name: str, *devices: tuple[str, str]) -> dict[str, Any]:
        resources = [{"driver_name": d, "pool_name": "node-1", "device_name": n} for d, n in devices]
        return {"claim_name": name, "claim_namespace": "ml", "claim_resources": resources}

    claims = {
        "train-a": claim("small", ("gpu.nvidia.com", "gpu-0-mig-1g10gb-19-0")),
        "serve-b": claim("big", ("gpu.nvidia.com", "gpu-0-mig-2g20gb-14-4"), ("nic.example.com", "eth1")),
        "whole-c": claim("whole", ("gpu.nvidia.com", "gpu-1")),
    }
    host = {
        "proc": {str(pid): {"cgroup": systemd_cgroup(pod_uid(n), container_id(n))} for n, _, _, pid in pods},
        "pod_resources": [
            {"namespace": "ml", "name": pod, "containers": [{"name": c, "dynamic_resources": [claims[pod]]}]}
            for _, pod, c, _ in pods
        ],
        "log_pods": [f"ml_{pod}_{pod_uid(n)}" for n, pod, _, _ in pods],
        "log_containers": [f"{pod}_ml_{c}-{container_id(n)}.log" for n, pod, c, _ in pods],
    }

    def process(pid: int, gib: int) -> dict[str, Any]:
        return {"pid": pid, "name": "python", "type": "compute", "used_memory_bytes": gib * GIB}

    gpus = [
        {
            "uuid": GPU0,
            "name": "NVIDIA H100 80GB HBM3",
            "memory_total_bytes": 80 * GIB,
            "memory_used_bytes": 9 * GIB,
            "mig": [
                {
                    "gpu_instance_id": 9,
                    "compute_instance_id": 0,
                    "profile": "1g.10gb",
                    "uuid": MIG_SMALL,
                    "memory_total_bytes": 10 * GIB,
                    "memory_used_bytes": 3 * GIB,
                    "processes": [process(7001, 3)],
                },
                {
                    "gpu_instance_id": 5,
                    "compute_instance_id": 0,
                    "profile": "2g.20gb",
                    "uuid": MIG_BIG,
                    "memory_total_bytes": 20 * GIB,
                    "memory_used_bytes": 6 * GIB,
                    "processes": [process(7003, 6)],
                },
            ],
        },
        {
            "uuid": GPU1,
            "name": "NVIDIA H100 80GB HBM3",
            "memory_total_bytes": 80 * GIB,
            "memory_used_bytes": 12 * GIB,
            "processes": [process(8001, 12)],
        },
    ]
    path = tmp_path / "dra.json"
    path.write_text(
        json.dumps({"driver_version": "570.86.15", "cuda_version": "12.8", "gpus": gpus, "host": host})
    )
    return path


@pytest.mark.servers
def test_dra_claims_reach_prometheus_on_the_right_gpu_and_instance(
    prometheus: ManagedServer, tmp_path: Path
) -> None:
    run = run_once_into(prometheus, scenario(tmp_path), "dra-node")
    assert "nic.example.com" in run.stderr and run.stderr.count("unknown driver") == 1, run.stderr

    info = prom_query(prometheus, 'falcon_gpu_pod_info{node="dra-node"}')
    got = {
        (m["pod"], m.get("uuid"), m.get("mig_uuid", ""), m["resource"], m["allocated"], m["claim_name"],
         m["claim_namespace"])
        for m in (r["metric"] for r in info)
    }  # fmt: skip
    assert got == {
        ("train-a", GPU0, MIG_SMALL, DRA, "true", "small", "ml"),
        ("serve-b", GPU0, MIG_BIG, DRA, "true", "big", "ml"),
        ("whole-c", GPU1, "", DRA, "true", "whole", "ml"),
    }
    memory = {
        r["metric"]["pod"]: float(r["value"][1])
        for r in prom_query(prometheus, 'falcon_gpu_pod_memory_used_bytes{node="dra-node"}')
    }
    assert memory == {"train-a": 3 * GIB, "serve-b": 6 * GIB, "whole-c": 12 * GIB}
    errors = prom_query(prometheus, 'falcon_gpu_agent_errors_total{node="dra-node", kind="dra_driver"}')
    assert [float(r["value"][1]) for r in errors] == [1.0]


def test_unknown_drivers_are_counted_each_refresh_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    loaded = load_scenario(scenario(tmp_path))
    assert loaded.host is not None
    host = SimulatedHost(loaded.host, tmp_path / "host")
    paths = host.start()
    settings = Settings(
        proc_root=paths.proc_root, log_root=paths.log_root, kubelet_socket=paths.kubelet_socket, node="n"
    )
    telemetry = Telemetry()
    attributor = Attributor(AttributionSettings.of(settings), telemetry)
    try:
        with caplog.at_level(logging.WARNING, logger="falcon_gpu"):
            attributor.refresh_now()
            attributor.refresh_now()
        rows = {r[0]: r for r in attributor.diagnose(snapshot(gpu(0)))}
    finally:
        attributor.close()
        host.stop()
    assert telemetry.view().errors_total["dra_driver"] == 2
    assert [r.getMessage() for r in caplog.records if "nic.example.com" in r.getMessage()] == [
        "DRA claim ml/big of pod ml/serve-b has device 'eth1' of driver 'nic.example.com': unknown driver, "
        "left unmapped (only gpu.nvidia.com devices gpu-<minor> and "
        "gpu-<minor>-mig-<profile>-<id>-<placement> are)"
    ]
    assert (
        rows["kubelet socket"][1] == "OK" and "3 of 4 DRA claim devices mapped" in rows["kubelet socket"][2]
    )


def _attribute_twins(
    tmp_path: Path, socket_path: Path, claims: tuple[tuple[str, int], ...], placements: tuple[int, int] | None
) -> list[tuple[str, str | None, bool, str | None]]:
    """Two 1g.10gb instances on GPU 0 (MIG_SMALL, GI 9; MIG_BIG, GI 10, with the placement starts
    ``placements``), and one pod per ``(pod, placement)`` claiming the instance at that placement
    through the real PodResources gRPC server; the n-th pod's process runs on the n-th instance.
    Returns (pod, mig_uuid, allocated, resource) of every pod series, sorted."""
    from falcon_gpu.model.snapshot import MigReading

    tree = HostTree(tmp_path)
    pods = []
    for n, (pod, placement) in enumerate(claims, start=1):
        tree.process(10 + n, systemd_cgroup(pod_uid(n), container_id(n)))
        tree.container("ml", pod, pod_uid(n), "main", container_id(n))
        device = PodResourcesClaimDevice("gpu.nvidia.com", "node-1", f"gpu-0-mig-1g10gb-19-{placement}")
        claim = PodResourcesClaim(f"claim-{n}", "ml", (device,))
        pods.append(PodResourcesPod("ml", pod, (PodResourcesContainer("main", (), (claim,)),)))
    server = PodResourcesServer(socket_path, pods)
    server.start()
    starts = placements or (None, None)
    twins = tuple(
        MigReading(gi, 0, "1g.10gb", uuid, placement_start=start,
                   processes=(proc(10 + n, n, None, gpu_instance_id=gi),) if n <= len(claims) else ())
        for n, (gi, uuid, start) in enumerate(((9, MIG_SMALL, starts[0]), (10, MIG_BIG, starts[1])), start=1)
    )  # fmt: skip
    settings = Settings(proc_root=tree.proc, log_root=tree.log, kubelet_socket=socket_path, node="n")
    attributor = Attributor(AttributionSettings.of(settings), Telemetry())
    try:
        attributor.refresh_now()
        result = attributor.attribute(snapshot(gpu(0, mig=twins)))
    finally:
        attributor.close()
        server.stop()
    return sorted((p.container.pod, p.mig_uuid, p.allocated, p.resource) for p in result.pods)


def test_a_mig_profile_twice_on_one_gpu_is_left_unmapped(tmp_path: Path, socket_path: Path) -> None:
    """Two 1g.10gb instances: without NVML's placement the DRA name cannot pick one, so the
    claim maps to neither (never to the wrong one); the process is still attributed by cgroup."""
    assert _attribute_twins(tmp_path, socket_path, (("train-a", 0),), None) == [
        ("train-a", MIG_SMALL, False, None)
    ]


def test_a_mig_profile_twice_on_one_gpu_is_told_apart_by_placement(tmp_path: Path, socket_path: Path) -> None:
    """With NVML's placement start on each instance, the DRA name's placement picks the instance:
    serve-b (running on the second 1g.10gb) claims placement 3, train-a (on the first) placement 2;
    a placement no instance has maps to none."""
    got = _attribute_twins(tmp_path, socket_path, (("train-a", 2), ("serve-b", 3)), (2, 3))
    assert got == [("serve-b", MIG_BIG, True, DRA), ("train-a", MIG_SMALL, True, DRA)]
    crossed = _attribute_twins(tmp_path / "x", socket_path, (("train-a", 3), ("serve-b", 2)), (2, 3))
    assert crossed == [  # each claim lands on the instance it names, whoever runs there
        ("serve-b", MIG_SMALL, True, DRA),
        ("serve-b", MIG_BIG, False, None),
        ("train-a", MIG_SMALL, False, None),
        ("train-a", MIG_BIG, True, DRA),
    ]
    missing = _attribute_twins(tmp_path / "y", socket_path, (("train-a", 5),), (2, 3))
    assert missing == [("train-a", MIG_SMALL, False, None)]


def twin_scenario(tmp_path: Path, *, placements: bool) -> Path:
    """GPU 0 with two 1g.10gb instances (placement starts 2 and 3 when ``placements``); pod
    train-a claims the one at placement 3 through DRA and runs on it."""
    uid, cid = pod_uid(1), container_id(1)
    device = {"driver_name": "gpu.nvidia.com", "pool_name": "node-1", "device_name": "gpu-0-mig-1g10gb-19-3"}
    host = {
        "proc": {"7001": {"cgroup": systemd_cgroup(uid, cid)}},
        "pod_resources": [
            {
                "namespace": "ml",
                "name": "train-a",
                "containers": [
                    {
                        "name": "main",
                        "dynamic_resources": [
                            {"claim_name": "c", "claim_namespace": "ml", "claim_resources": [device]}
                        ],
                    }
                ],
            }
        ],
        "log_pods": [f"ml_train-a_{uid}"],
        "log_containers": [f"train-a_ml_main-{cid}.log"],
    }

    def instance(gi: int, uuid: str, start: int, processes: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"gpu_instance_id": gi, "profile": "1g.10gb", "uuid": uuid,
                               "memory_total_bytes": 10 * GIB, "memory_used_bytes": 2 * GIB,
                               "processes": processes}  # fmt: skip
        if placements:
            out["placement_start"] = start
        return out

    running = [{"pid": 7001, "name": "python", "type": "compute", "used_memory_bytes": 2 * GIB}]
    gpus = [
        {
            "uuid": GPU0,
            "name": "NVIDIA A100-SXM4-80GB",
            "memory_total_bytes": 80 * GIB,
            "memory_used_bytes": 4 * GIB,
            "mig": [instance(9, MIG_SMALL, 2, []), instance(10, MIG_BIG, 3, running)],
        }
    ]
    path = tmp_path / "twins.json"
    path.write_text(
        json.dumps({"driver_version": "570.86.15", "cuda_version": "12.8", "gpus": gpus, "host": host})
    )
    return path


@pytest.mark.servers
@pytest.mark.parametrize(("placements", "allocated"), [(True, "true"), (False, "false")])
def test_a_dra_mig_device_lands_on_the_right_instance_end_to_end(
    prometheus: ManagedServer, tmp_path: Path, placements: bool, allocated: str
) -> None:
    """The simulator's NVML answers nvmlGpuInstanceGetInfo, the agent's MIG reader reads each
    instance's placement start, and the claim of the PodResources gRPC server maps by it. Where
    NVML tells no placement (NOT_SUPPORTED here; NO_PERMISSION for an unprivileged agent) the
    twin profile cannot be resolved: the claim maps to neither, the process is still the pod's."""
    run_once_into(prometheus, twin_scenario(tmp_path, placements=placements), "twin-node")
    info = prom_query(prometheus, 'falcon_gpu_pod_info{node="twin-node"}')
    assert [(r["metric"]["pod"], r["metric"]["mig_uuid"], r["metric"]["allocated"]) for r in info] == [
        ("train-a", MIG_BIG, allocated)
    ]
