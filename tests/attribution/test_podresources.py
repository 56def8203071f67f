"""PodResources v1 over a real gRPC server on a temporary unix socket: the client, device IDs,
and the Attributor falling back to cgroups while the kubelet is down, then reconnecting."""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from falcon_gpu.attribution import AttributionSettings, Attributor
from falcon_gpu.attribution.device_ids import DeviceRef, is_gpu_resource, parse_device_id, parse_device_ids
from falcon_gpu.attribution.podresources import PodResourcesClient, PodResourcesError
from falcon_gpu.attribution.sources.kubelet import KUBELET_STALE_GRACE
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import Settings
from falcon_gpu.simulator.node.podresources_server import PodResourcesServer
from falcon_gpu.simulator.scenario.host_model import (
    PodResourcesContainer,
    PodResourcesDevice,
    PodResourcesPod,
)

from .helpers import GIB, HostTree, container_id, gpu, pod_uid, proc, snapshot, systemd_cgroup

RESOURCES = ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*"]


def pod(ns: str, name: str, container: str, resource: str, *ids: str) -> PodResourcesPod:
    devices = (PodResourcesDevice(resource, ids),)
    return PodResourcesPod(ns, name, (PodResourcesContainer(container, devices),))


@pytest.fixture
def socket_path() -> Iterator[Path]:
    # unix socket paths must stay short: pytest's tmp_path can exceed the limit
    with tempfile.TemporaryDirectory(prefix="fgpu-") as d:
        yield Path(d) / "kubelet.sock"


@pytest.mark.parametrize(
    ("device_id", "expected"),
    [
        ("GPU-abc", DeviceRef(gpu_uuid="GPU-abc")),
        ("GPU-abc::3", DeviceRef(gpu_uuid="GPU-abc")),
        ("MIG-def", DeviceRef(mig_uuid="MIG-def")),
        ("MIG-def::1", DeviceRef(mig_uuid="MIG-def")),
        ("MIG-GPU-abc/3/0", DeviceRef(gpu_uuid="GPU-abc", gpu_instance_id=3)),
        ("nvidia2", DeviceRef(gpu_index=2)),
        ("nvidia0/gi5", DeviceRef(gpu_index=0, gpu_instance_id=5)),
        ("nvidia1/vgpu3", DeviceRef(gpu_index=1)),  # GKE time-sharing replica
        ("nvidia0/gi5/vgpu0", DeviceRef(gpu_index=0, gpu_instance_id=5)),
        ("nvidia0/vgpux", None),
        ("0000:3b:00.0", None),
        ("", None),
    ],
)
def test_device_ids(device_id: str, expected: DeviceRef | None) -> None:
    assert parse_device_id(device_id) == expected


def test_replicas_are_deduplicated() -> None:
    assert parse_device_ids(["GPU-a::0", "GPU-a::1", "GPU-b::0", "GPU-a::2"]) == (
        DeviceRef(gpu_uuid="GPU-a"),
        DeviceRef(gpu_uuid="GPU-b"),
    )
    assert parse_device_ids(["nvidia0/vgpu0", "nvidia0/vgpu1"]) == (DeviceRef(gpu_index=0),)


def test_resource_globs() -> None:
    assert is_gpu_resource("nvidia.com/mig-1g.10gb", RESOURCES)
    assert is_gpu_resource("nvidia.com/gpu.shared", RESOURCES)
    assert not is_gpu_resource("amd.com/gpu", RESOURCES)
    assert not is_gpu_resource("nvidia.com/gpu-extra", RESOURCES)


def test_client_lists_gpu_allocations_only(socket_path: Path) -> None:
    pods = [
        pod("a", "shared-0", "main", "nvidia.com/gpu.shared", "GPU-x::0", "GPU-x::1"),
        pod("a", "cpu-only", "main", "cpu", "1", "2"),
        PodResourcesPod(
            "b",
            "mixed",
            (
                PodResourcesContainer(
                    "c",
                    (
                        PodResourcesDevice("example.com/fpga", ("fpga0",)),
                        PodResourcesDevice("nvidia.com/mig-1g.10gb", ("MIG-y",)),
                    ),
                ),
            ),
        ),
    ]
    allocatable = (PodResourcesDevice("nvidia.com/gpu", ("GPU-x", "GPU-z")),)
    server = PodResourcesServer(socket_path, pods, allocatable)
    server.start()
    client = PodResourcesClient(socket_path, RESOURCES)
    try:
        got = client.fetch()
    finally:
        client.close()
        server.stop()
    assert [(a.namespace, a.pod, a.container, a.resource, a.devices) for a in got.allocations] == [
        ("a", "shared-0", "main", "nvidia.com/gpu.shared", (DeviceRef(gpu_uuid="GPU-x"),)),
        ("b", "mixed", "c", "nvidia.com/mig-1g.10gb", (DeviceRef(mig_uuid="MIG-y"),)),
    ]
    assert got.allocatable == (
        ("nvidia.com/gpu", DeviceRef(gpu_uuid="GPU-x")),
        ("nvidia.com/gpu", DeviceRef(gpu_uuid="GPU-z")),
    )


def test_client_errors_say_what_to_fix(socket_path: Path) -> None:
    client = PodResourcesClient(socket_path, RESOURCES, timeout=2.0)
    with pytest.raises(PodResourcesError, match="does not exist: mount"):
        client.fetch()
    socket_path.write_text("")  # a stale file where the socket was: connection refused
    with pytest.raises(PodResourcesError, match="not answering"):
        client.fetch()
    client.close()


def test_close_cancels_a_call_hung_in_the_kubelet(socket_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()

    class HungKubelet(PodResourcesServer):
        def state(self) -> tuple[tuple[PodResourcesPod, ...], tuple[PodResourcesDevice, ...]]:
            entered.set()
            release.wait(30)
            return super().state()

    server = HungKubelet(socket_path, [pod("ml", "p", "c", "nvidia.com/gpu", "GPU-x")])
    server.start()
    client = PodResourcesClient(socket_path, RESOURCES, timeout=20.0)
    errors: list[Exception] = []

    def fetch() -> None:
        try:
            client.fetch()
        except PodResourcesError as exc:
            errors.append(exc)

    caller = threading.Thread(target=fetch, daemon=True)
    caller.start()
    try:
        assert entered.wait(10)
        started = time.monotonic()
        client.close()
        assert time.monotonic() - started < 10  # not the 20 s the List could still take
        caller.join(10)
        assert not caller.is_alive() and len(errors) == 1
    finally:
        release.set()
        server.stop()


def test_attributor_close_does_not_wait_for_a_hung_kubelet(tmp_path: Path, socket_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()

    class HungKubelet(PodResourcesServer):
        def state(self) -> tuple[tuple[PodResourcesPod, ...], tuple[PodResourcesDevice, ...]]:
            entered.set()
            release.wait(30)
            return super().state()

    server = HungKubelet(socket_path)
    server.start()
    tree = HostTree(tmp_path)
    settings = Settings(proc_root=tree.proc, log_root=tree.log, kubelet_socket=socket_path, node="n1")
    attributor = Attributor(AttributionSettings.of(settings), Telemetry())
    try:
        attributor.start()
        assert entered.wait(10)
        started = time.monotonic()
        attributor.close()
        assert time.monotonic() - started < 4  # the refresher's join alone would take 5 s
    finally:
        release.set()
        server.stop()


def test_attributor_falls_back_to_cgroups_and_reconnects(
    tmp_path: Path, socket_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree = HostTree(tmp_path)
    uid, cid = pod_uid(1), container_id(1)
    tree.process(4242, systemd_cgroup(uid, cid))
    tree.container("ml", "train-0", uid, "main", cid)
    g0, g1 = gpu(0), gpu(1)
    server = PodResourcesServer(
        socket_path,
        [
            pod("ml", "train-0", "main", "nvidia.com/gpu", g0.uuid),
            pod("ml", "idle-0", "main", "nvidia.com/gpu", g1.uuid),
        ],
    )
    server.start()
    telemetry = Telemetry()
    settings = Settings(
        proc_root=tree.proc, log_root=tree.log, kubelet_socket=socket_path, node="n1", **tree.no_runtimes()
    )
    now = [1000.0]
    attributor = Attributor(AttributionSettings.of(settings), telemetry, clock=lambda: now[0])
    snap = snapshot(gpu(0, (proc(4242, 2, 0.5),)), g1)
    try:
        attributor.refresh_now()
        up = attributor.attribute(snap)
        assert {(p.container.pod, p.allocated) for p in up.pods} == {("train-0", True), ("idle-0", True)}
        assert up.sources_ok == {"cgroup": True, "kubelet": True, "logs": True}

        server.stop()  # kubelet restarting
        caplog.set_level(logging.WARNING, logger="falcon_gpu")
        now[0] += 60  # a short restart: the last answer is kept, allocations do not flap
        attributor.refresh_now()
        brief = attributor.attribute(snap)
        assert {(p.container.pod, p.allocated) for p in brief.pods} == {("train-0", True), ("idle-0", True)}
        assert brief.sources_ok["kubelet"] is False
        for _ in range(2):
            now[0] += KUBELET_STALE_GRACE
            attributor.refresh_now()
            down = attributor.attribute(snap)
        assert [(p.container.pod, p.allocated, p.memory_used_bytes) for p in down.pods] == [
            ("train-0", False, 2 * GIB)
        ]
        assert down.sources_ok["kubelet"] is False
        assert telemetry.view().errors_total["kubelet"] == 3
        warnings = [r for r in caplog.records if "kubelet" in r.getMessage()]
        assert len(warnings) == 1 and "cgroups alone" in warnings[0].getMessage()

        server.start()  # back on the same path: the client reconnects by itself
        attributor.refresh_now()
        again = attributor.attribute(snap)
        assert {(p.container.pod, p.allocated) for p in again.pods} == {("train-0", True), ("idle-0", True)}
        assert not telemetry.is_failing("kubelet")
    finally:
        attributor.close()
        server.stop()


def test_background_refresh_does_not_call_the_kubelet_per_cycle(tmp_path: Path, socket_path: Path) -> None:
    tree = HostTree(tmp_path)
    server = PodResourcesServer(socket_path, [pod("ml", "p", "c", "nvidia.com/gpu", gpu(0).uuid)])
    server.start()
    settings = Settings(
        proc_root=tree.proc, log_root=tree.log, kubelet_socket=socket_path, node="n1", interval=30
    )
    attributor = Attributor(AttributionSettings.of(settings), Telemetry())
    try:
        attributor.refresh_now()
        calls = server.calls
        for _ in range(50):
            attributor.attribute(snapshot(gpu(0)))
        assert server.calls == calls
    finally:
        attributor.close()
        server.stop()
