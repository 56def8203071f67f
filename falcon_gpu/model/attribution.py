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

import msgspec

DEFAULT_JOB_LABELS = (
    "training.kubeflow.org/job-name",
    "jobset.sigs.k8s.io/jobset-name",
    "batch.kubernetes.io/job-name",
    "volcano.sh/job-name",
)
"""Pod labels the job controllers set on every pod of one job (Kubeflow training operator, JobSet,
Job, Volcano): pods that share one are one distributed job, whose GPUs should move together."""


class ContainerRef(msgspec.Struct, frozen=True, gc=False, cache_hash=True):
    """A container of a pod; ``labels`` are the copied pod labels (already sanitised names)."""

    namespace: str
    pod: str
    container: str
    pod_uid: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    requested_memory_bytes: int | None = None
    """Its memory quota on each GPU it is on (``pod_requests``); None: it asked for none."""
    requested_compute_ratio: float | None = None
    """Its compute quota per GPU, 1 = a whole GPU; None: it asked for none."""
    owner: str | None = None
    """The pod's controller from the API server (a ReplicaSet read as its Deployment); None
    without ``pod_labels``/``pod_requests`` or for a bare pod (:mod:`falcon_gpu.advice.workload`)."""


class PodUsage(msgspec.Struct, frozen=True, gc=False):
    """One container's use of one GPU (or one MIG instance) in one cycle."""

    container: ContainerRef
    gpu_uuid: str
    mig_uuid: str | None = None
    resource: str | None = None
    """kubelet resource name when allocated, e.g. ``nvidia.com/gpu``, or ``dra:<driver>`` for a DRA
    claim; None when only seen running."""
    allocated: bool = False
    memory_used_bytes: int = 0
    utilization_ratio: float | None = 0.0
    """None: NVML gives no per-process utilisation for a process of this container here."""
    processes: int = 0
    energy_joules_total: float | None = 0.0
    """None where the utilisation is None: energy is shared out by SM share."""
    allocation_idle_seconds: float = 0.0
    claim_name: str | None = None
    """DRA: the ResourceClaim the device was allocated through (``resource="dra:<driver>"``)."""
    claim_namespace: str | None = None


class UnattributedUsage(msgspec.Struct, frozen=True, gc=False):
    """Everything on a device (or MIG instance) that is not in a pod.

    ``memory_used_bytes`` is the device's used memory minus every pod's on it:
    processes in no pod (host daemons, other runtimes), memory no process reports
    (driver and context overhead) and, for a MIG-enabled GPU's whole-GPU entry, the
    memory outside every instance. So per GPU, Σ pods + Σ unattributed = device used.
    None when the device reported no memory used. ``utilization_ratio`` and
    ``processes`` count only the processes in no pod.
    """

    gpu_uuid: str
    mig_uuid: str | None = None
    memory_used_bytes: int | None = 0
    utilization_ratio: float | None = 0.0
    processes: int = 0
    energy_joules_total: float = 0.0
    """The device energy not shared out to pods (idle draw included), so pods + this = device."""


class ProcessUsage(msgspec.Struct, frozen=True, gc=False):
    """One process, for the optional per-process series."""

    pid: int
    command: str
    gpu_uuid: str
    mig_uuid: str | None = None
    memory_used_bytes: int = 0
    utilization_ratio: float | None = 0.0
    """None: NVML gives no per-process utilisation on this device."""
    container: ContainerRef | None = None


class _Usage(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """What a breakdown row of the unattributed share (a plain container's, a Slurm job step's) holds
    for one GPU or MIG instance, after its owner's own keys. Keyword-only, so a subclass's owner keys
    (required, no defaults) come first, positionally, and these follow them in the field order."""

    gpu_uuid: str
    mig_uuid: str | None = None
    memory_used_bytes: int = 0
    utilization_ratio: float | None = 0.0
    """None: NVML gives no per-process utilisation on this device."""
    processes: int = 0
    energy_joules_total: float | None = 0.0


class ContainerUsage(_Usage, frozen=True, gc=False):
    """One plain container's (Docker, Podman, containerd; outside Kubernetes) use of one GPU or
    MIG instance. Its processes are in no pod, so they also count in unattributed: this is a
    breakdown of that, not an addition to the pods."""

    runtime: str
    container_id: str
    name: str
    """The runtime's name for it; the first 12 hex digits of the ID where no name is readable."""


class SlurmJobUsage(_Usage, frozen=True, gc=False):
    """One Slurm job step's use of one GPU or MIG instance. Like a plain container, its
    processes are in no pod: a breakdown of the unattributed share, not an addition to it."""

    job: str
    step: str
    uid: int | None
    user: str | None
    """The uid's name in the host's passwd (``passwd_file``); None where it is not readable."""
    name: str | None
    """The job's name (``SLURM_JOB_NAME`` in its processes' environment, read once per job); None
    where it is not readable."""


class Attribution(msgspec.Struct, frozen=True, gc=False):
    pods: tuple[PodUsage, ...] = ()
    unattributed: tuple[UnattributedUsage, ...] = ()
    processes: tuple[ProcessUsage, ...] = ()
    containers: tuple[ContainerUsage, ...] = ()
    """Plain containers outside Kubernetes, per GPU (or MIG instance) they use."""
    slurm_jobs: tuple[SlurmJobUsage, ...] = ()
    """Slurm job steps, per GPU (or MIG instance) they use."""
    allocatable: tuple[tuple[str, int], ...] | None = None
    """(resource, distinct devices) the kubelet can hand out (GetAllocatableResources), for
    the resources matching ``gpu_resources``; None when the kubelet did not answer it."""
    sources_ok: dict[str, bool] = {}
    """Per lookup source (``cgroup``, ``kubelet``, ``logs``, ``kube_api``): answered this cycle."""
