"""A PodResources v1 server on a unix socket: the kubelet's side of the wire.

Part of the simulator, not of attribution: attribution never imports it (only
the generated stubs are shared), so the agent's import graph holds no test
server and the simulator -> attribution dependency runs one way. Backs the
simulator's host and the tests, so the agent's client is exercised
over real gRPC (HTTP/2 on a unix socket), not a mock. The answers come from the
scenario's typed ``host`` part. ``stop`` then ``start`` on the same path models a
kubelet restart.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from falcon_gpu.attribution.podresources.stubs import api_pb2, api_pb2_grpc
from falcon_gpu.simulator.scenario.host_model import PodResourcesClaim, PodResourcesDevice, PodResourcesPod


class _Servicer(api_pb2_grpc.PodResourcesListerServicer):  # type: ignore[misc]
    def __init__(self, owner: PodResourcesServer) -> None:
        self._owner = owner

    def List(self, request: Any, context: Any) -> Any:
        self._owner.calls += 1
        pods, _ = self._owner.state()
        return api_pb2.ListPodResourcesResponse(
            pod_resources=[
                api_pb2.PodResources(
                    name=pod.name,
                    namespace=pod.namespace,
                    containers=[
                        api_pb2.ContainerResources(
                            name=c.name,
                            devices=[_devices(d) for d in c.devices],
                            dynamic_resources=[_claim(claim) for claim in c.dynamic_resources],
                        )
                        for c in pod.containers
                    ],
                )
                for pod in pods
            ]
        )

    def GetAllocatableResources(self, request: Any, context: Any) -> Any:
        self._owner.allocatable_calls += 1
        _, allocatable = self._owner.state()
        return api_pb2.AllocatableResourcesResponse(devices=[_devices(d) for d in allocatable])


def _devices(dev: PodResourcesDevice) -> Any:
    return api_pb2.ContainerDevices(resource_name=dev.resource_name, device_ids=list(dev.device_ids))


def _claim(claim: PodResourcesClaim) -> Any:
    return api_pb2.DynamicResource(
        claim_name=claim.claim_name,
        claim_namespace=claim.claim_namespace,
        claim_resources=[
            api_pb2.ClaimResource(driver_name=d.driver_name, pool_name=d.pool_name, device_name=d.device_name)
            for d in claim.claim_resources
        ],
    )


class PodResourcesServer:
    """Serves List (devices and DRA ``dynamic_resources``) and GetAllocatableResources on ``unix://<socket_path>``."""

    def __init__(
        self,
        socket_path: Path,
        pods: Sequence[PodResourcesPod] = (),
        allocatable: Sequence[PodResourcesDevice] = (),
    ) -> None:
        self.socket_path = socket_path
        self._lock = threading.Lock()
        self._pods = tuple(pods)
        self._allocatable = tuple(allocatable)
        self._server: grpc.Server | None = None
        self.calls = 0
        """List calls answered (tests check the client does not call per cycle)."""
        self.allocatable_calls = 0
        """GetAllocatableResources calls answered (the second call of a refresh)."""

    def state(self) -> tuple[tuple[PodResourcesPod, ...], tuple[PodResourcesDevice, ...]]:
        with self._lock:
            return self._pods, self._allocatable

    def start(self) -> None:
        """Bind and serve. Raises RuntimeError when the socket cannot be bound."""
        if self._server is not None:
            return
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        if self.socket_path.exists():
            self.socket_path.unlink()  # a stale socket from a previous run
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="podresources"))
        api_pb2_grpc.add_PodResourcesListerServicer_to_server(_Servicer(self), server)
        if server.add_insecure_port(f"unix://{self.socket_path}") == 0:
            raise RuntimeError(f"cannot bind PodResources server to {self.socket_path}")
        server.start()
        self._server = server

    def stop(self) -> None:
        """Stop serving and remove the socket file (as a stopped kubelet leaves no listener)."""
        server, self._server = self._server, None
        if server is not None:
            server.stop(grace=None).wait(5)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
