"""Pod, unattributed, per-process and kubelet series of the ``falcon_gpu`` schema (CONTRACT
section 4 "Pods"); the ``dcgm`` schema keeps them too.

A reading the attribution marks None (per-pod utilisation and energy where NVML has no
per-process utilisation) adds no series: absent, not 0 (CONTRACT section 3).
"""

from __future__ import annotations

from falcon_gpu.advice.workload import workload_of
from falcon_gpu.model.attribution import ContainerRef
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.samples import Labels
from falcon_gpu.model.snapshot import DeviceReading, MigReading
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec, without_empty
from falcon_gpu.schemas.falcon_gpu_device import DeviceLabelSets, mig_key
from falcon_gpu.schemas.label_cache import Kept, LabelCache

P = "falcon_gpu_"

SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(
        P + "pod_info", "gauge", "Pod to GPU map: allocated by the kubelet or running processes on it."
    ),
    MetricSpec(P + "pod_memory_used_bytes", "gauge", "GPU memory used by the container's processes."),
    MetricSpec(
        P + "pod_utilization_ratio", "gauge", "Sum of the container's processes' SM share, at most 1."
    ),
    MetricSpec(P + "pod_processes", "gauge", "Processes of the container on the GPU."),
    MetricSpec(
        P + "pod_requested_memory_bytes",
        "gauge",
        "GPU memory the container was given on this GPU (HAMi gpumem, gpu-manager vcuda-memory).",
    ),
    MetricSpec(
        P + "pod_requested_compute_ratio",
        "gauge",
        "Share of this GPU's compute the container was given (gpucores, vcuda-core; a whole GPU = 1).",
    ),
    MetricSpec(
        P + "pod_energy_joules_total", "counter", "The GPU's energy shared out to the container by SM share."
    ),
    MetricSpec(
        P + "pod_allocation_idle_seconds", "gauge", "Allocated and unused for this long (0 while used)."
    ),
    MetricSpec(
        P + "unattributed_memory_used_bytes",
        "gauge",
        "The GPU's memory used not in a pod (processes in no pod, driver overhead): device - pods.",
    ),
    MetricSpec(P + "unattributed_utilization_ratio", "gauge", "SM share of processes in no pod."),
    MetricSpec(
        P + "unattributed_energy_joules_total",
        "counter",
        "The GPU's energy not shared out to pods (idle draw, processes in no pod) since the agent started.",
    ),
    MetricSpec(P + "process_memory_used_bytes", "gauge", "GPU memory used by one process."),
    MetricSpec(P + "process_utilization_ratio", "gauge", "SM share of one process."),
    MetricSpec(
        P + "container_info", "gauge", "A plain container (Docker, Podman, containerd; no pod) using the GPU."
    ),
    MetricSpec(P + "container_memory_used_bytes", "gauge", "GPU memory of the plain container's processes."),
    MetricSpec(P + "container_utilization_ratio", "gauge", "The plain container's processes' SM share."),
    MetricSpec(P + "container_processes", "gauge", "Processes of the plain container on the GPU."),
    MetricSpec(
        P + "container_energy_joules_total",
        "counter",
        "The GPU's energy shared out to the plain container by SM share (part of the unattributed energy).",
    ),
    MetricSpec(P + "slurm_job_info", "gauge", "A Slurm job step using the GPU."),
    MetricSpec(P + "slurm_job_memory_used_bytes", "gauge", "GPU memory of the job step's processes."),
    MetricSpec(P + "slurm_job_utilization_ratio", "gauge", "The job step's processes' SM share."),
    MetricSpec(P + "slurm_job_processes", "gauge", "Processes of the job step on the GPU."),
    MetricSpec(
        P + "slurm_job_energy_joules_total",
        "counter",
        "The GPU's energy shared out to the job step by SM share (part of the unattributed energy).",
    ),
    MetricSpec(
        P + "allocatable_devices",
        "gauge",
        "Devices the kubelet can hand out per resource (GetAllocatableResources).",
    ),
)


class DeviceIndex:
    """uuid -> device and MIG uuid -> (device, instance), built once per render on first use (a
    cycle with no pod, container, job or process to label, as on a node without attribution,
    builds neither)."""

    __slots__ = ("_by_uuid", "_devices", "_kept", "_mig")

    def __init__(self, devices: tuple[DeviceReading, ...], kept: DeviceLabelSets) -> None:
        """``kept``: the renderer's device label tuples."""
        self._devices = devices
        self._kept = kept
        self._by_uuid: dict[str, DeviceReading] | None = None
        self._mig: dict[str, tuple[DeviceReading, MigReading]] | None = None

    @property
    def by_uuid(self) -> dict[str, DeviceReading]:
        if self._by_uuid is None:
            self._by_uuid = {d.uuid: d for d in self._devices}
        return self._by_uuid

    @property
    def mig(self) -> dict[str, tuple[DeviceReading, MigReading]]:
        if self._mig is None:
            self._mig = {m.uuid: (d, m) for d in self._devices for m in d.mig}
        return self._mig

    def labels(self, node: Labels, gpu_uuid: str, mig_uuid: str | None) -> Labels | None:
        """Device labels for a physical GPU or MIG instance; None when the snapshot lacks it.

        ``node``: the cycle's base labels (``node`` and the ``labels`` setting)."""
        dev = self.by_uuid.get(gpu_uuid)
        if dev is None:
            return None
        labels = self._kept.of(node, dev)  # node labels + gpu, uuid, model; kept per identity
        if mig_uuid is None:
            return labels.device
        found: tuple[DeviceReading, MigReading] | None = self.mig.get(mig_uuid)
        if found is None:
            return (*labels.device, ("mig_uuid", mig_uuid))  # its instance ids are unknown: no labels
        return labels.migs.get(mig_key(found[1]))


def container_labels(c: ContainerRef) -> Labels:
    return (("namespace", c.namespace), ("pod", c.pod), ("container", c.container), *c.labels)


PodKey = tuple[Labels, str, str, str, Labels, str, bool, str, str, str | None]
"""Device labels, namespace, pod, container, copied pod labels, resource, allocated, claim name and
namespace, owner: all that a pod's series' labels say (its requests and readings are values, not labels)."""


def _pod_labels(key: PodKey) -> tuple[Labels, Labels]:
    """(the pod's series' labels, its ``pod_info`` labels), empty values left out.

    Only ``pod_info`` carries the ``workload`` (what survives the pod's restarts,
    :mod:`falcon_gpu.advice.workload`): one series per pod already, so no new series; the rules
    join it to the pod's other series (energy per workload)."""
    dl, namespace, pod, container, copied, resource, allocated, claim, claim_ns, owner = key
    lb = without_empty((*dl, ("namespace", namespace), ("pod", pod), ("container", container), *copied))
    info = (
        *lb,
        ("resource", resource),
        ("allocated", "true" if allocated else "false"),
        ("workload", workload_of(pod, container, owner)),
        ("claim_name", claim),  # DRA only; empty labels are left out
        ("claim_namespace", claim_ns),
    )
    return lb, without_empty(info)


ProcessKey = tuple[Labels, "ContainerRef | None", int, str]
"""Device labels, container (None: in no pod), pid, command."""


def _process_labels(key: ProcessKey) -> Labels:
    dl, container, pid, command = key
    cl = container_labels(container) if container else (("namespace", ""), ("pod", ""), ("container", ""))
    return without_empty((*dl, *cl, ("pid", str(pid)), ("command", command)))


class PodLabels(Kept):
    """The pod and process series' label tuples one renderer keeps (:mod:`falcon_gpu.schemas.label_cache`)."""

    __slots__ = ("pods", "processes")

    def __init__(self) -> None:
        self.pods: LabelCache[PodKey, tuple[Labels, Labels]] = LabelCache(_pod_labels)
        """A pod's label tuples, built once per pod on a device (a pod that goes is dropped when the
        cache fills and starts again)."""
        self.processes: LabelCache[ProcessKey, Labels] = LabelCache(_process_labels)
        """A process's labels, built once per process (its pid, command and container hold for its life)."""


_POD_FAMILIES = tuple(spec.name for spec in SPECS if spec.name.startswith(P + "pod_"))
_PROCESS_FAMILIES = (P + "process_memory_used_bytes", P + "process_utilization_ratio")
"""Groups of families gathered in one loop: a loop none of whose families is emitted is skipped."""


def add_pods(b: FamilyBuilder, cycle: CycleData, index: DeviceIndex, kept: PodLabels) -> None:
    att = cycle.attribution
    node = cycle.base_labels
    for resource, count in att.allocatable or ():
        b.add(P + "allocatable_devices", (*node, ("resource", resource)), count)
    for use in att.pods if any(map(b.wants, _POD_FAMILIES)) else ():
        dl = index.labels(node, use.gpu_uuid, use.mig_uuid)
        if dl is None:
            continue
        c = use.container
        lb, info = kept.pods.get(
            (
                dl,
                c.namespace,
                c.pod,
                c.container,
                c.labels,
                use.resource or "",
                use.allocated,
                use.claim_name or "",
                use.claim_namespace or "",
                c.owner,
            )
        )
        b.put(P + "pod_info", info, 1)
        b.put(P + "pod_memory_used_bytes", lb, use.memory_used_bytes)
        b.put(P + "pod_utilization_ratio", lb, _capped(use.utilization_ratio))
        b.put(P + "pod_processes", lb, use.processes)
        b.put(P + "pod_requested_memory_bytes", lb, c.requested_memory_bytes)
        b.put(P + "pod_requested_compute_ratio", lb, c.requested_compute_ratio)
        b.put(P + "pod_energy_joules_total", lb, use.energy_joules_total)
        if use.allocated:
            b.put(P + "pod_allocation_idle_seconds", lb, use.allocation_idle_seconds)
    for un in att.unattributed:
        dl = index.labels(node, un.gpu_uuid, un.mig_uuid)
        if dl is None:
            continue
        b.add(P + "unattributed_memory_used_bytes", dl, un.memory_used_bytes)
        b.add(P + "unattributed_utilization_ratio", dl, _capped(un.utilization_ratio))
        b.add(P + "unattributed_energy_joules_total", dl, un.energy_joules_total)
    for box in att.containers:
        dl = index.labels(node, box.gpu_uuid, box.mig_uuid)
        if dl is None:
            continue
        lb = (*dl, ("container", box.name), ("runtime", box.runtime), ("container_id", box.container_id))
        b.add(P + "container_info", lb, 1)
        b.add(P + "container_memory_used_bytes", lb, box.memory_used_bytes)
        b.add(P + "container_utilization_ratio", lb, _capped(box.utilization_ratio))
        b.add(P + "container_processes", lb, box.processes)
        b.add(P + "container_energy_joules_total", lb, box.energy_joules_total)
    for job in att.slurm_jobs:
        dl = index.labels(node, job.gpu_uuid, job.mig_uuid)
        if dl is None:
            continue
        lb = (*dl, ("slurm_job", job.job), ("slurm_step", job.step))
        if job.uid is not None:
            lb = (*lb, ("uid", str(job.uid)))
        if job.user is not None:
            lb = (*lb, ("user", job.user))
        b.add(P + "slurm_job_info", lb, 1)
        b.add(P + "slurm_job_memory_used_bytes", lb, job.memory_used_bytes)
        b.add(P + "slurm_job_utilization_ratio", lb, _capped(job.utilization_ratio))
        b.add(P + "slurm_job_processes", lb, job.processes)
        b.add(P + "slurm_job_energy_joules_total", lb, job.energy_joules_total)
    if not cycle.process_metrics or not any(map(b.wants, _PROCESS_FAMILIES)):
        return
    for proc in att.processes:
        dl = index.labels(node, proc.gpu_uuid, proc.mig_uuid)
        if dl is None:
            continue
        lb = kept.processes.get((dl, proc.container, proc.pid, proc.command))
        b.put(P + "process_memory_used_bytes", lb, proc.memory_used_bytes)
        b.put(P + "process_utilization_ratio", lb, proc.utilization_ratio)


def _capped(ratio: float | None) -> float | None:
    return None if ratio is None else min(ratio, 1.0)
