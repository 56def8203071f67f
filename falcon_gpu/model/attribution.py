"""Who uses which GPU: the result of joining processes and kubelet allocations to pods.

Produced by :mod:`falcon_gpu.attribution`, read by the schemas. A *device key*
names a physical GPU by UUID, or a MIG instance by its MIG UUID, so that pod
series can carry the same device labels as the device series.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ContainerRef:
    """A container of a pod; ``labels`` are the copied pod labels (already sanitised names)."""

    namespace: str
    pod: str
    container: str
    pod_uid: str | None = None
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class PodUsage:
    """One container's use of one GPU (or one MIG instance) in one cycle."""

    container: ContainerRef
    gpu_uuid: str
    mig_uuid: str | None = None
    resource: str | None = None
    """kubelet resource name when allocated, e.g. ``nvidia.com/gpu``; None when only seen running."""
    allocated: bool = False
    memory_used_bytes: int = 0
    utilization_ratio: float = 0.0
    processes: int = 0
    energy_joules_total: float = 0.0
    allocation_idle_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class UnattributedUsage:
    """Processes on a device that belong to no pod (host daemons, other runtimes)."""

    gpu_uuid: str
    mig_uuid: str | None = None
    memory_used_bytes: int = 0
    utilization_ratio: float = 0.0
    processes: int = 0
    energy_joules_total: float = 0.0
    """The device energy not shared out to pods (idle draw included), so pods + this = device."""


@dataclass(frozen=True, slots=True)
class ProcessUsage:
    """One process, for the optional per-process series."""

    pid: int
    command: str
    gpu_uuid: str
    mig_uuid: str | None = None
    memory_used_bytes: int = 0
    utilization_ratio: float = 0.0
    container: ContainerRef | None = None


@dataclass(frozen=True, slots=True)
class Attribution:
    pods: tuple[PodUsage, ...] = ()
    unattributed: tuple[UnattributedUsage, ...] = ()
    processes: tuple[ProcessUsage, ...] = ()
    sources_ok: dict[str, bool] = field(default_factory=dict)
    """Per lookup source (``cgroup``, ``kubelet``, ``logs``, ``kube_api``): answered this cycle."""
