"""The typed ``host`` part of a scenario: what a node around the GPUs looks like.

Parsed by :mod:`falcon_gpu.simulator.scenario.parse`, laid out on disk (proc tree, log
dirs, a real PodResources gRPC server) by :mod:`falcon_gpu.simulator.node.layout`.
Frozen ``msgspec.Struct`` values, as in :mod:`~falcon_gpu.simulator.scenario.model`.
"""

from __future__ import annotations

import msgspec


class PodResourcesDevice(msgspec.Struct, frozen=True, gc=False):
    resource_name: str
    device_ids: tuple[str, ...]


class PodResourcesClaimDevice(msgspec.Struct, frozen=True, gc=False):
    """One device of a DRA claim: the driver, its pool (the node) and its device name."""

    driver_name: str
    pool_name: str
    device_name: str


class PodResourcesClaim(msgspec.Struct, frozen=True, gc=False):
    """A DRA ResourceClaim a container uses, as PodResources ``dynamic_resources`` lists it."""

    claim_name: str
    claim_namespace: str
    claim_resources: tuple[PodResourcesClaimDevice, ...]


class PodResourcesContainer(msgspec.Struct, frozen=True, gc=False):
    name: str
    devices: tuple[PodResourcesDevice, ...]
    dynamic_resources: tuple[PodResourcesClaim, ...] = ()


class PodResourcesPod(msgspec.Struct, frozen=True, gc=False):
    namespace: str
    name: str
    containers: tuple[PodResourcesContainer, ...]


class ApiContainer(msgspec.Struct, frozen=True, gc=False):
    """A container of a pod's spec: its ``resources`` limits and requests (quantities as text)."""

    name: str
    limits: tuple[tuple[str, str], ...] = ()
    requests: tuple[tuple[str, str], ...] = ()


class ApiPod(msgspec.Struct, frozen=True, gc=False):
    """One pod of the API server's pod list (``GET /api/v1/pods``) on the simulated node."""

    namespace: str
    name: str
    uid: str
    labels: tuple[tuple[str, str], ...]
    containers: tuple[ApiContainer, ...]
    owner: tuple[tuple[str, str], ...] = ()
    """Its controller (``kind``, ``name``) as one ``ownerReferences`` entry; none: a bare pod."""


class HostScenario(msgspec.Struct, frozen=True, gc=False):
    proc_cgroups: dict[int, str]
    """host PID -> the text of ``/proc/<pid>/cgroup``."""
    pod_resources: tuple[PodResourcesPod, ...]
    log_containers: tuple[str, ...]
    """File names under ``<log_root>/containers/``."""
    log_pods: tuple[str, ...]
    """Directory names under ``<log_root>/pods/``."""
    allocatable: tuple[PodResourcesDevice, ...] = ()
    """What GetAllocatableResources answers: derived from the scenario's GPU and MIG UUIDs."""
    docker_containers: tuple[tuple[str, str], ...] = ()
    """(container ID, name) of plain Docker containers, laid out as a Docker data root."""
    podman_containers: tuple[tuple[str, str], ...] = ()
    """(container ID, name) of Podman containers, laid out as Podman's containers storage."""
    api_pods: tuple[ApiPod, ...] = ()
    """This node's pods as the API server lists them (labels, GPU quotas); none: no API server."""
    proc_uids: tuple[tuple[int, int], ...] = ()
    """(host PID, uid) written as ``/proc/<pid>/status``'s ``Uid:`` line (Slurm on cgroup v2)."""
    proc_environ: tuple[tuple[int, tuple[tuple[str, str], ...]], ...] = ()
    """(host PID, its environment variables) written as ``/proc/<pid>/environ`` (NUL-separated
    ``NAME=value``): ``SLURM_JOB_NAME`` names a Slurm job."""
    users: tuple[tuple[str, int], ...] = ()
    """(name, uid) laid out as the host's passwd file."""
