"""The typed ``host`` part of a scenario: what a node around the GPUs looks like.

Parsed by :mod:`falcon_gpu.simulator.scenario`, laid out on disk (proc tree, log
dirs, a real PodResources gRPC server) by :mod:`falcon_gpu.simulator.host`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PodResourcesDevice:
    resource_name: str
    device_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PodResourcesContainer:
    name: str
    devices: tuple[PodResourcesDevice, ...]


@dataclass(frozen=True, slots=True)
class PodResourcesPod:
    namespace: str
    name: str
    containers: tuple[PodResourcesContainer, ...]


@dataclass(frozen=True, slots=True)
class HostScenario:
    proc_cgroups: dict[int, str]
    """host PID -> the text of ``/proc/<pid>/cgroup``."""
    pod_resources: tuple[PodResourcesPod, ...]
    log_containers: tuple[str, ...]
    """File names under ``<log_root>/containers/``."""
    log_pods: tuple[str, ...]
    """Directory names under ``<log_root>/pods/``."""
    allocatable: tuple[PodResourcesDevice, ...] = ()
    """What GetAllocatableResources answers: derived from the scenario's GPU and MIG UUIDs."""
