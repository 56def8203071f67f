"""Who uses which GPU: the result of joining processes and kubelet allocations to pods.

Produced by :mod:`falcon_gpu.attribution`, read by the schemas. A *device key*
names a physical GPU by UUID, or a MIG instance by its MIG UUID, so that pod
series can carry the same device labels as the device series.

A reading NVML does not give is ``None`` and becomes no series (CONTRACT section 3,
"absent, not 0"): per-pod utilisation and energy where NVML has no per-process
utilisation (MIG-enabled GPUs, devices that answer NOT_SUPPORTED), unattributed
memory where the device's own memory reading is missing.
"""

from __future__ import annotations

from typing import Final

from falcon_gpu.model.record import Record


class ContainerRef(Record):
    """A container of a pod; ``labels`` are the copied pod labels (already sanitised names)."""

    __slots__ = _fields = (
        "namespace",
        "pod",
        "container",
        "pod_uid",
        "labels",
        "requested_memory_bytes",
        "requested_compute_ratio",
        "owner",
    )

    def __init__(
        self,
        namespace: str,
        pod: str,
        container: str,
        pod_uid: str | None = None,
        labels: tuple[tuple[str, str], ...] = (),
        requested_memory_bytes: int | None = None,
        requested_compute_ratio: float | None = None,
        owner: str | None = None,
    ) -> None:
        self.namespace: Final = namespace
        self.pod: Final = pod
        self.container: Final = container
        self.pod_uid: Final = pod_uid
        self.labels: Final = labels
        self.requested_memory_bytes: Final = requested_memory_bytes
        """Its memory quota on each GPU it is on (``pod_requests``); None: it asked for none."""
        self.requested_compute_ratio: Final = requested_compute_ratio
        """Its compute quota per GPU, 1 = a whole GPU; None: it asked for none."""
        self.owner: Final = owner
        """The pod's controller from the API server (a ReplicaSet read as its Deployment); None
        without ``pod_labels``/``pod_requests`` or for a bare pod (:mod:`falcon_gpu.advice.workload`)."""


class PodUsage(Record):
    """One container's use of one GPU (or one MIG instance) in one cycle."""

    __slots__ = _fields = (
        "container",
        "gpu_uuid",
        "mig_uuid",
        "resource",
        "allocated",
        "memory_used_bytes",
        "utilization_ratio",
        "processes",
        "energy_joules_total",
        "allocation_idle_seconds",
        "claim_name",
        "claim_namespace",
    )

    def __init__(
        self,
        container: ContainerRef,
        gpu_uuid: str,
        mig_uuid: str | None = None,
        resource: str | None = None,
        allocated: bool = False,
        memory_used_bytes: int = 0,
        utilization_ratio: float | None = 0.0,
        processes: int = 0,
        energy_joules_total: float | None = 0.0,
        allocation_idle_seconds: float = 0.0,
        claim_name: str | None = None,
        claim_namespace: str | None = None,
    ) -> None:
        self.container: Final = container
        self.gpu_uuid: Final = gpu_uuid
        self.mig_uuid: Final = mig_uuid
        self.resource: Final = resource
        """kubelet resource name when allocated, e.g. ``nvidia.com/gpu``, or ``dra:<driver>`` for a DRA
        claim; None when only seen running."""
        self.allocated: Final = allocated
        self.memory_used_bytes: Final = memory_used_bytes
        self.utilization_ratio: Final = utilization_ratio
        """None: NVML gives no per-process utilisation for a process of this container here."""
        self.processes: Final = processes
        self.energy_joules_total: Final = energy_joules_total
        """None where the utilisation is None: energy is shared out by SM share."""
        self.allocation_idle_seconds: Final = allocation_idle_seconds
        self.claim_name: Final = claim_name
        """DRA: the ResourceClaim the device was allocated through (``resource="dra:<driver>"``)."""
        self.claim_namespace: Final = claim_namespace


class UnattributedUsage(Record):
    """Everything on a device (or MIG instance) that is not in a pod.

    ``memory_used_bytes`` is the device's used memory minus every pod's on it:
    processes in no pod (host daemons, other runtimes), memory no process reports
    (driver and context overhead) and, for a MIG-enabled GPU's whole-GPU entry, the
    memory outside every instance. So per GPU, Σ pods + Σ unattributed = device used.
    None when the device reported no memory used. ``utilization_ratio`` and
    ``processes`` count only the processes in no pod.
    """

    __slots__ = _fields = (
        "gpu_uuid",
        "mig_uuid",
        "memory_used_bytes",
        "utilization_ratio",
        "processes",
        "energy_joules_total",
    )

    def __init__(
        self,
        gpu_uuid: str,
        mig_uuid: str | None = None,
        memory_used_bytes: int | None = 0,
        utilization_ratio: float | None = 0.0,
        processes: int = 0,
        energy_joules_total: float = 0.0,
    ) -> None:
        self.gpu_uuid: Final = gpu_uuid
        self.mig_uuid: Final = mig_uuid
        self.memory_used_bytes: Final = memory_used_bytes
        self.utilization_ratio: Final = utilization_ratio
        self.processes: Final = processes
        self.energy_joules_total: Final = energy_joules_total
        """The device energy not shared out to pods (idle draw included), so pods + this = device."""


class ProcessUsage(Record):
    """One process, for the optional per-process series."""

    __slots__ = _fields = (
        "pid",
        "command",
        "gpu_uuid",
        "mig_uuid",
        "memory_used_bytes",
        "utilization_ratio",
        "container",
    )

    def __init__(
        self,
        pid: int,
        command: str,
        gpu_uuid: str,
        mig_uuid: str | None = None,
        memory_used_bytes: int = 0,
        utilization_ratio: float | None = 0.0,
        container: ContainerRef | None = None,
    ) -> None:
        self.pid: Final = pid
        self.command: Final = command
        self.gpu_uuid: Final = gpu_uuid
        self.mig_uuid: Final = mig_uuid
        self.memory_used_bytes: Final = memory_used_bytes
        self.utilization_ratio: Final = utilization_ratio
        """None: NVML gives no per-process utilisation on this device."""
        self.container: Final = container


class ContainerUsage(Record):
    """One plain container's (Docker, Podman, containerd; outside Kubernetes) use of one GPU or
    MIG instance. Its processes are in no pod, so they also count in unattributed: this is a
    breakdown of that, not an addition to the pods."""

    __slots__ = _fields = (
        "runtime",
        "container_id",
        "name",
        "gpu_uuid",
        "mig_uuid",
        "memory_used_bytes",
        "utilization_ratio",
        "processes",
        "energy_joules_total",
    )

    def __init__(
        self,
        runtime: str,
        container_id: str,
        name: str,
        gpu_uuid: str,
        mig_uuid: str | None = None,
        memory_used_bytes: int = 0,
        utilization_ratio: float | None = 0.0,
        processes: int = 0,
        energy_joules_total: float | None = 0.0,
    ) -> None:
        self.runtime: Final = runtime
        self.container_id: Final = container_id
        self.name: Final = name
        """The runtime's name for it; the first 12 hex digits of the ID where no name is readable."""
        self.gpu_uuid: Final = gpu_uuid
        self.mig_uuid: Final = mig_uuid
        self.memory_used_bytes: Final = memory_used_bytes
        self.utilization_ratio: Final = utilization_ratio
        """None: NVML gives no per-process utilisation on this device."""
        self.processes: Final = processes
        self.energy_joules_total: Final = energy_joules_total


class SlurmJobUsage(Record):
    """One Slurm job step's use of one GPU or MIG instance. Like a plain container, its
    processes are in no pod: a breakdown of the unattributed share, not an addition to it."""

    __slots__ = _fields = (
        "job",
        "step",
        "uid",
        "user",
        "gpu_uuid",
        "mig_uuid",
        "memory_used_bytes",
        "utilization_ratio",
        "processes",
        "energy_joules_total",
    )

    def __init__(
        self,
        job: str,
        step: str,
        uid: int | None,
        user: str | None,
        gpu_uuid: str,
        mig_uuid: str | None = None,
        memory_used_bytes: int = 0,
        utilization_ratio: float | None = 0.0,
        processes: int = 0,
        energy_joules_total: float | None = 0.0,
    ) -> None:
        self.job: Final = job
        self.step: Final = step
        self.uid: Final = uid
        self.user: Final = user
        """The uid's name in the host's passwd (``passwd_file``); None where it is not readable."""
        self.gpu_uuid: Final = gpu_uuid
        self.mig_uuid: Final = mig_uuid
        self.memory_used_bytes: Final = memory_used_bytes
        self.utilization_ratio: Final = utilization_ratio
        self.processes: Final = processes
        self.energy_joules_total: Final = energy_joules_total


class Attribution(Record):
    __slots__ = _fields = (
        "pods",
        "unattributed",
        "processes",
        "containers",
        "slurm_jobs",
        "allocatable",
        "sources_ok",
    )

    def __init__(
        self,
        pods: tuple[PodUsage, ...] = (),
        unattributed: tuple[UnattributedUsage, ...] = (),
        processes: tuple[ProcessUsage, ...] = (),
        containers: tuple[ContainerUsage, ...] = (),
        slurm_jobs: tuple[SlurmJobUsage, ...] = (),
        allocatable: tuple[tuple[str, int], ...] | None = None,
        sources_ok: dict[str, bool] | None = None,
    ) -> None:
        self.pods: Final = pods
        self.unattributed: Final = unattributed
        self.processes: Final = processes
        self.containers: Final = containers
        """Plain containers outside Kubernetes, per GPU (or MIG instance) they use."""
        self.slurm_jobs: Final = slurm_jobs
        """Slurm job steps, per GPU (or MIG instance) they use."""
        self.allocatable: Final = allocatable
        """(resource, distinct devices) the kubelet can hand out (GetAllocatableResources), for
        the resources matching ``gpu_resources``; None when the kubelet did not answer it."""
        self.sources_ok: Final = {} if sources_ok is None else sources_ok
        """Per lookup source (``cgroup``, ``kubelet``, ``logs``, ``kube_api``): answered this cycle."""
