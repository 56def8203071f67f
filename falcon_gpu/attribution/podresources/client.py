"""Ask the kubelet which containers hold which GPUs (PodResources v1 ``List`` and
``GetAllocatableResources`` over its unix socket).

Only resources matching ``gpu_resources`` are kept, and device IDs are parsed
(:mod:`falcon_gpu.attribution.device_ids`). The client is called from the
background refresher, never from a cycle. It owns one gRPC channel; after a
failed call the channel is dropped and a new one made on the next call, so a
kubelet restart (the socket file is recreated) is picked up without gRPC's
reconnect backoff and without a per-cycle reconnect.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import grpc

import msgspec

from falcon_gpu.attribution.device_ids import DeviceRef, is_gpu_resource, parse_device_ids
from falcon_gpu.attribution.source import Allocation

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The kubelet's own client limit; a node's full List fits well under it."""


class PodResourcesError(Exception):
    """The kubelet socket is missing, refused the call, or answered with an error.

    The message says what to check (the mount, the kubelet, the feature gate).
    """


class ClaimDevice(msgspec.Struct, frozen=True, gc=False):
    """One device of a DRA claim used by one container, as PodResources List reports it."""

    namespace: str
    pod: str
    container: str
    claim_name: str
    claim_namespace: str
    driver: str
    pool: str
    device: str


class KubeletAllocations(msgspec.Struct, frozen=True, gc=False):
    allocations: tuple[Allocation, ...] = ()
    allocatable: tuple[tuple[str, DeviceRef], ...] = ()
    """(resource, device) pairs the kubelet can hand out; empty when the kubelet has no such call."""
    allocatable_devices: tuple[tuple[str, int], ...] | None = None
    """(resource, distinct devices) from ``allocatable``, counted once per fetch (off the hot
    path); None when the kubelet does not offer GetAllocatableResources."""
    claims: tuple[ClaimDevice, ...] = ()
    """Every DRA claim device of every container (``dynamic_resources``; none before Kubernetes
    1.32 or with DRA off), mapped by :mod:`falcon_gpu.attribution.dra_claims`."""


class PodResourcesClient:
    """A client for one socket path; thread-safe (one lock around the channel)."""

    def __init__(self, socket_path: Path, gpu_resources: Sequence[str], *, timeout: float = 5.0) -> None:
        self.socket_path = socket_path
        self._resources = tuple(gpu_resources)
        self._timeout = timeout
        self._lock = threading.Lock()
        self._channel: grpc.Channel | None = None
        self._stub: Any = None

    def _connect(self) -> Any:
        """Lazy: grpc and the stubs load on the first call, only where a socket exists."""
        import grpc

        from falcon_gpu.attribution.podresources.stubs import api_pb2_grpc

        if self._stub is None:
            self._channel = grpc.insecure_channel(
                f"unix://{self.socket_path}",
                options=[
                    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.enable_http_proxy", 0),
                ],
            )
            self._stub = api_pb2_grpc.PodResourcesListerStub(self._channel)
        return self._stub

    def _drop(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel = None
        self._stub = None

    def _list(self, stub: Any) -> Any:
        """One List call (the caller holds the lock). Raises PodResourcesError."""
        import grpc

        from falcon_gpu.attribution.podresources.stubs import api_pb2

        try:
            return stub.List(api_pb2.ListPodResourcesRequest(), timeout=self._timeout)
        except grpc.RpcError as exc:
            self._drop()
            raise PodResourcesError(
                f"kubelet PodResources List on {self.socket_path} failed: {_describe(exc)}"
            ) from None

    def _check_socket(self) -> None:
        if not self.socket_path.exists():
            raise PodResourcesError(
                f"kubelet socket {self.socket_path} does not exist: mount the host's "
                "/var/lib/kubelet/pod-resources into the agent (read-only) or set kubelet_socket"
            )

    def fetch(self) -> KubeletAllocations:
        """List allocations (and allocatable devices when the kubelet offers the call).

        Raises PodResourcesError when the socket is missing or the List call fails.
        """
        self._check_socket()
        import grpc

        from falcon_gpu.attribution.podresources.stubs import api_pb2

        with self._lock:
            stub = self._connect()
            listed = self._list(stub)
            allocatable: tuple[tuple[str, DeviceRef], ...] = ()
            counts: tuple[tuple[str, int], ...] | None = None
            try:
                answer = stub.GetAllocatableResources(
                    api_pb2.AllocatableResourcesRequest(), timeout=self._timeout
                )
                allocatable = self._allocatable(answer)
                counts = count_devices(allocatable)
            except grpc.RpcError:
                pass  # kubelets before 1.23 (or the feature gate off): allocations still work
        return KubeletAllocations(self._allocations(listed), allocatable, counts, self._claims(listed))

    def _claims(self, listed: Any) -> tuple[ClaimDevice, ...]:
        return tuple(
            ClaimDevice(
                pod.namespace,
                pod.name,
                container.name,
                claim.claim_name,
                claim.claim_namespace,
                device.driver_name,
                device.pool_name,
                device.device_name,
            )
            for pod in listed.pod_resources
            for container in pod.containers
            for claim in container.dynamic_resources
            for device in claim.claim_resources
        )

    def _allocations(self, listed: Any) -> tuple[Allocation, ...]:
        out: list[Allocation] = []
        for pod in listed.pod_resources:
            for container in pod.containers:
                for dev in container.devices:
                    if not is_gpu_resource(dev.resource_name, self._resources):
                        continue
                    refs = parse_device_ids(dev.device_ids)
                    if refs:
                        out.append(
                            Allocation(pod.namespace, pod.name, container.name, dev.resource_name, refs)
                        )
        return tuple(out)

    def _allocatable(self, answer: Any) -> tuple[tuple[str, DeviceRef], ...]:
        out: dict[tuple[str, DeviceRef], None] = {}
        for dev in answer.devices:
            if is_gpu_resource(dev.resource_name, self._resources):
                for ref in parse_device_ids(dev.device_ids):
                    out.setdefault((dev.resource_name, ref), None)
        return tuple(out)

    def close(self) -> None:
        """Cancel a call in flight (a hung kubelet would otherwise hold the lock, and so
        the agent's shutdown, for up to twice the timeout), then release the channel."""
        channel = self._channel
        if channel is not None:
            channel.close()  # thread-safe: the call in flight fails with CANCELLED at once
        with self._lock:
            self._drop()


def count_devices(allocatable: Sequence[tuple[str, DeviceRef]]) -> tuple[tuple[str, int], ...]:
    """Distinct devices per resource, sorted by resource. The pairs are already parsed and
    de-duplicated (shared replicas ``GPU-<uuid>::<n>`` name one device), so this counts GPUs
    (or MIG instances) the kubelet can hand out, not replicas."""
    counts: dict[str, int] = {}
    for resource, _ in allocatable:
        counts[resource] = counts.get(resource, 0) + 1
    return tuple(sorted(counts.items()))


def _describe(exc: grpc.RpcError) -> str:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    name = getattr(code, "name", str(code))
    if name == "UNAVAILABLE":
        return f"kubelet not answering ({details}); is it running or restarting?"
    if name == "UNIMPLEMENTED":
        return "the kubelet does not serve PodResources v1 (needs Kubernetes >= 1.20)"
    return f"{name}: {details}"
