"""``falcon_gpu_allocatable_devices{resource}`` from the kubelet's GetAllocatableResources, over
a real PodResources gRPC server on a unix socket: GPU resources only, replicas of one device
counted once, absent (not 0) when the kubelet does not offer the call; and end to end through
the CLI on the shared-GPU scenario, whose simulated kubelet serves ``host.allocatable``."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from falcon_gpu.attribution.podresources import PodResourcesClient
from falcon_gpu.attribution.podresources.stubs import api_pb2, api_pb2_grpc
from falcon_gpu.simulator.node.podresources_server import PodResourcesServer
from falcon_gpu.simulator.scenario.host_model import PodResourcesDevice
from falcon_gpu.simulator.scenario.parse import ScenarioError, load_scenario, resolve_scenario
from tests.agent.test_cli_e2e import cli, parse_prom

RESOURCES = ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*"]


@pytest.fixture
def socket_path() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="fgpu-alloc-"))  # unix socket paths must stay short
    yield d / "kubelet.sock"
    shutil.rmtree(d, ignore_errors=True)


def test_distinct_gpu_devices_per_resource(socket_path: Path) -> None:
    allocatable = (
        PodResourcesDevice("nvidia.com/gpu.shared", tuple(f"GPU-a::{i}" for i in range(4))),
        PodResourcesDevice("nvidia.com/gpu", ("GPU-b", "GPU-c")),
        PodResourcesDevice("nvidia.com/gpu", ("GPU-c",)),  # listed twice (two NUMA entries): one device
        PodResourcesDevice("nvidia.com/mig-1g.10gb", ("MIG-x", "MIG-y")),
        PodResourcesDevice("example.com/fpga", ("fpga0", "fpga1")),  # not a GPU resource
        PodResourcesDevice("nvidia.com/gpu", ("not-a-gpu-id",)),
    )
    server = PodResourcesServer(socket_path, (), allocatable)
    server.start()
    client = PodResourcesClient(socket_path, RESOURCES)
    try:
        got = client.fetch()
    finally:
        client.close()
        server.stop()
    assert got.allocatable_devices == (
        ("nvidia.com/gpu", 2),
        ("nvidia.com/gpu.shared", 1),
        ("nvidia.com/mig-1g.10gb", 2),
    )


class _OldKubelet(api_pb2_grpc.PodResourcesListerServicer):  # type: ignore[misc]
    """List only: the generated base class answers UNIMPLEMENTED to GetAllocatableResources,
    as a kubelet before 1.23 (or with the KubeletPodResourcesGetAllocatable gate off) does."""

    def List(self, request: Any, context: Any) -> Any:
        return api_pb2.ListPodResourcesResponse()


def test_absent_when_the_kubelet_has_no_get_allocatable(socket_path: Path) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    api_pb2_grpc.add_PodResourcesListerServicer_to_server(_OldKubelet(), server)
    assert server.add_insecure_port(f"unix://{socket_path}")
    server.start()
    client = PodResourcesClient(socket_path, RESOURCES)
    try:
        got = client.fetch()
    finally:
        client.close()
        server.stop(None)
    assert got.allocatable_devices is None  # unknown, not "no GPUs": no series


def test_run_and_plugin_report_the_kubelets_allocatable_devices(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'node = "sim-node"\nspool_dir = "{tmp_path / "spool"}"\n')
    want = {"nvidia.com/gpu": 3.0, "nvidia.com/gpu.shared": 1.0}  # 8 replicas of one GPU are one GPU
    for schema in ("falcon_gpu", "dcgm"):
        proc = cli("run", "--simulate", "shared-gpu", "--once", "--config", str(cfg), env=_env(schema))
        assert proc.returncode == 0, proc.stderr
        got = {
            dict(lb)["resource"]: v
            for (name, lb), v in parse_prom(proc.stdout).items()
            if name == "falcon_gpu_allocatable_devices"
        }
        assert got == want, schema
        labels = {
            frozenset(lb)
            for (name, lb), _ in parse_prom(proc.stdout).items()
            if name.endswith("allocatable_devices")
        }
        assert labels == {
            frozenset({("node", "sim-node"), ("resource", r)}) for r in want
        }  # a node-level series: no device labels
    plugin = cli("plugin", "--simulate", "shared-gpu", "--config", str(cfg))
    assert plugin.returncode == 0, plugin.stderr
    items = {(i["tags"], i["value"]) for i in json.loads(plugin.stdout) if i["metric"] == "AllocatableGPUs"}
    assert items == {("resource=nvidia.com_gpu", 3.0), ("resource=nvidia.com_gpu.shared", 1.0)}


def _env(schema: str) -> dict[str, str]:
    return {**os.environ, "FALCON_GPU_SCHEMA": schema}


def test_scenario_allocatable_is_parsed_strictly(tmp_path: Path) -> None:
    scenario = json.loads(resolve_scenario("shared-gpu").read_text())
    assert load_scenario(resolve_scenario("shared-gpu")).host.allocatable[0] == PodResourcesDevice(  # type: ignore[union-attr]
        "nvidia.com/gpu.shared", tuple(f"GPU-fe49fb4c-3d29-111a-1278-513e4ab0ce96::{i}" for i in range(8))
    )
    scenario["host"]["allocatable"][1]["devices_ids"] = []
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(scenario))
    with pytest.raises(ScenarioError, match=r"host\.allocatable\[1\]\.devices_ids: unknown key"):
        load_scenario(bad)
