"""The join: processes (via their cgroup) and kubelet allocations -> per-container GPU use.

Pure apart from the ledger (energy counters, idle timers) it owns; all I/O has
happened before (PID cache) or off the hot path (the sources' views, asked through
one :class:`~falcon_gpu.attribution.chain.Chain`). One
:class:`~falcon_gpu.model.attribution.PodUsage` per (container, GPU, MIG
instance) that is allocated by the kubelet or has processes on it:

* memory: sum over the container's processes on that device;
* utilisation: sum of their SM shares, capped at 1; None (absent, not 0) when a
  process has no SM share because NVML gives no per-process utilisation there;
* energy: the GPU's energy delta shared out by SM share (see ledger), None with
  the utilisation;
* ``allocated``/``resource`` from PodResources, ``allocation_idle_seconds`` for
  allocated devices without a process of the container.

A process whose cgroup names no pod is unattributed; if it runs in a plain container
(Docker, Podman, containerd: ``plain``), it is also tallied per container
(:class:`~falcon_gpu.model.attribution.ContainerUsage`), a breakdown inside the
unattributed totals, never taken out of them; a process of a Slurm job step (``slurm``) is
tallied per job step the same way (:class:`~falcon_gpu.model.attribution.SlurmJobUsage`).
One whose cgroup names a
pod the name maps do not know yet (a pod that just started) is unattributed
this cycle and reported as a *miss*, so the caller can trigger a rescan.

Unattributed memory is what the device reports used minus every pod's share
(:func:`unattributed_memory`), not the sum of the processes in no pod: driver and
context overhead belong to no process, and pods + unattributed must add up to the
device exactly, like energy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import msgspec

from falcon_gpu.attribution.cgroup import CgroupIdentity
from falcon_gpu.attribution.chain import Chain
from falcon_gpu.attribution.device_index import DeviceIndex, DeviceKey, place_processes
from falcon_gpu.attribution.ledger import ContainerKey, EnergyLedger, IdleTracker, UsageKey
from falcon_gpu.attribution.runtime_cgroup import RuntimeContainer
from falcon_gpu.attribution.slurm_cgroup import SlurmStep
from falcon_gpu.attribution.source import Allocation
from falcon_gpu.model.attribution import (
    Attribution,
    ContainerRef,
    ContainerUsage,
    PodUsage,
    ProcessUsage,
    SlurmJobUsage,
    UnattributedUsage,
)
from falcon_gpu.model.snapshot import ProcessReading, Snapshot


class _Acc:
    """What one (container, device) key's processes add up to this cycle (built per key a cycle)."""

    __slots__ = ("memory", "processes", "sm", "sm_missing")

    def __init__(self) -> None:
        self.memory = 0
        self.sm = 0.0
        self.processes = 0
        self.sm_missing = False
        """A process here had no SM share (NVML gives none on this device)."""

    def utilization(self) -> float | None:
        return None if self.sm_missing else min(1.0, self.sm)

    def add(self, proc: ProcessReading) -> None:
        self.memory += proc.used_memory_bytes or 0
        self.sm += proc.sm_util_ratio or 0.0
        self.sm_missing |= proc.sm_util_ratio is None
        self.processes += 1


class JoinResult(msgspec.Struct, frozen=True, gc=False):
    attribution: Attribution
    misses: frozenset[str]
    """Container IDs (or pod UIDs) seen in cgroups that could not be named (yet)."""
    in_pod: int
    """Processes whose cgroup names a pod."""
    attributed: int
    """Of those, the ones resolved to a namespace/pod/container."""


class Joiner:
    def __init__(
        self, *, process_metrics: bool = False, retention: float = 600.0, pod_uid: bool = False
    ) -> None:
        self.process_metrics = process_metrics
        self.pod_uid = pod_uid
        """Put ``pod_uid`` in the pod labels (the ``pod_uid`` setting)."""
        self.energy = EnergyLedger(retention)
        self.plain_energy = EnergyLedger(retention)
        """Plain containers' shares; they are part of the unattributed energy too, kept apart."""
        self.slurm_energy = EnergyLedger(retention)
        """Slurm job steps' shares, likewise."""
        self.idle = IdleTracker()
        self._named = _Named()

    def join(
        self,
        snapshot: Snapshot,
        identities: Mapping[int, CgroupIdentity | None],
        chain: Chain,
        now: float,
        sources_ok: dict[str, bool] | None = None,
        plain: Mapping[int, RuntimeContainer | None] | None = None,
        slurm: Mapping[int, SlurmStep | None] | None = None,
        slurm_names: Mapping[str, str | None] | None = None,
    ) -> JoinResult:
        """``plain``/``slurm``: per PID in no pod, the Docker/Podman/containerd container or the
        Slurm job step it runs in; ``slurm_names``: Slurm job id -> its name."""
        refs = self._named.refs(chain)
        plain_usage: dict[UsageKey, _Acc] = {}
        slurm_usage: dict[UsageKey, _Acc] = {}
        misses: set[str] = set()
        usage: dict[UsageKey, _Acc] = {}
        unattributed: dict[DeviceKey, _Acc] = {}
        processes: list[ProcessUsage] = []
        in_pod = attributed = 0
        allocated = _allocated(snapshot, chain)

        for dev in snapshot.devices:
            unattributed.setdefault((dev.uuid, None), _Acc())
            for mig in dev.mig:
                unattributed.setdefault((dev.uuid, mig.uuid), _Acc())
            placed = place_processes(dev)
            total_sm = sum(p.sm_util_ratio or 0.0 for _, p in placed)
            delta = self.energy.delta(dev.uuid, dev.energy_joules)
            shared = 0.0
            for mig_uuid, proc in placed:
                sm = proc.sm_util_ratio or 0.0
                ident = identities.get(proc.pid)
                ckey = chain.container(proc.pid, ident)
                if ident is not None:
                    in_pod += 1
                    attributed += ckey is not None
                    if ckey is None:
                        misses.add(ident.container_id or ident.pod_uid)
                box = None if ckey is not None or plain is None else plain.get(proc.pid)
                job = None if ckey is not None or slurm is None else slurm.get(proc.pid)
                pkey: UsageKey | None = None
                jkey: UsageKey | None = None
                if ckey is not None:
                    acc = usage.setdefault((ckey, dev.uuid, mig_uuid), _Acc())
                else:
                    acc = unattributed.setdefault((dev.uuid, mig_uuid), _Acc())
                    if box is not None:
                        pkey = ((box.runtime, box.container_id, box.namespace or ""), dev.uuid, mig_uuid)
                        plain_usage.setdefault(pkey, _Acc()).add(proc)
                    if job is not None:
                        jkey = (
                            (job.job, job.step, "" if job.uid is None else str(job.uid)),
                            dev.uuid,
                            mig_uuid,
                        )
                        slurm_usage.setdefault(jkey, _Acc()).add(proc)
                acc.add(proc)
                if delta is not None and total_sm > 0 and sm > 0:
                    joules = delta * sm / total_sm
                    shared += joules
                    if ckey is not None:
                        self.energy.add_pod((ckey, dev.uuid, mig_uuid), joules, now)
                    else:
                        self.energy.add_unattributed((dev.uuid, mig_uuid), joules, now)
                        if pkey is not None:
                            self.plain_energy.add_pod(pkey, joules, now)
                        if jkey is not None:
                            self.slurm_energy.add_pod(jkey, joules, now)
                if self.process_metrics:
                    processes.append(
                        ProcessUsage(
                            pid=proc.pid,
                            command=proc.name or "",
                            gpu_uuid=dev.uuid,
                            mig_uuid=mig_uuid,
                            memory_used_bytes=proc.used_memory_bytes or 0,
                            utilization_ratio=None if proc.sm_util_ratio is None else min(1.0, sm),
                            container=self._ref(ckey, chain, refs) if ckey else None,
                        )
                    )
            if delta is not None:
                self.energy.add_unattributed((dev.uuid, None), max(0.0, delta - shared), now)

        pods = self._pod_rows(usage, allocated, chain, refs, now)
        memory = unattributed_memory(snapshot, usage)
        unattr = tuple(
            UnattributedUsage(
                gpu_uuid=gpu,
                mig_uuid=mig,
                memory_used_bytes=memory.get((gpu, mig)),
                utilization_ratio=acc.utilization(),
                processes=acc.processes,
                energy_joules_total=self.energy.unattributed_total((gpu, mig)),
            )
            for (gpu, mig), acc in unattributed.items()
        )
        self.energy.touch(usage.keys() | allocated.keys(), unattributed.keys(), now)
        self.energy.expire(now, (d.uuid for d in snapshot.devices))
        names = self._named.plain_names(chain)

        def container(box: ContainerKey) -> tuple[str, str, str]:
            runtime, container_id, namespace = box
            name = names.get(box)
            if name is None:
                name = names[box] = chain.plain_container_name(
                    RuntimeContainer(runtime, container_id, namespace or None)
                )
            return runtime, container_id, name

        def job_step(box: ContainerKey) -> tuple[str, str, int | None, str | None, str | None]:
            job, step, uid_text = box
            uid = int(uid_text) if uid_text else None
            user = None if uid is None else chain.user_name(uid)
            return job, step, uid, user, None if slurm_names is None else slurm_names.get(job)

        containers = _breakdown(ContainerUsage, plain_usage, self.plain_energy, now, container)
        slurm_jobs = _breakdown(SlurmJobUsage, slurm_usage, self.slurm_energy, now, job_step)
        if chain.allocations is not None:
            self.idle.retain(allocated.keys())
        attribution = Attribution(
            pods=pods,
            unattributed=unattr,
            processes=tuple(processes),
            containers=containers,
            slurm_jobs=slurm_jobs,
            allocatable=chain.allocatable_devices,
            sources_ok=dict(sources_ok or {}),
        )
        return JoinResult(attribution, frozenset(misses), in_pod, attributed)

    def _pod_rows(
        self,
        usage: Mapping[UsageKey, _Acc],
        allocated: Mapping[UsageKey, Allocation],
        chain: Chain,
        refs: dict[ContainerKey, ContainerRef],
        now: float,
    ) -> tuple[PodUsage, ...]:
        """One row per (container, device) that runs processes or is allocated, sorted."""
        pods: list[PodUsage] = []
        for key in sorted(usage.keys() | allocated.keys(), key=_sort_key):
            ckey, gpu, mig_key = key
            acc = usage.get(key) or _Acc()
            allocation = allocated.get(key)
            idle = self.idle.observe(key, acc.processes > 0, now) if allocation is not None else 0.0
            utilization = acc.utilization()
            pods.append(
                PodUsage(
                    container=self._ref(ckey, chain, refs),
                    gpu_uuid=gpu,
                    mig_uuid=mig_key,
                    resource=None if allocation is None else allocation.resource,
                    allocated=allocation is not None,
                    claim_name=None if allocation is None else allocation.claim_name,
                    claim_namespace=None if allocation is None else allocation.claim_namespace,
                    memory_used_bytes=acc.memory,
                    utilization_ratio=utilization,
                    processes=acc.processes,
                    energy_joules_total=None if utilization is None else self.energy.pod_total(key),
                    allocation_idle_seconds=idle,
                )
            )
        return tuple(pods)

    def _ref(self, ckey: ContainerKey, chain: Chain, cache: dict[ContainerKey, ContainerRef]) -> ContainerRef:
        ref = cache.get(ckey)
        if ref is None:
            namespace, pod, container = ckey
            uid = chain.pod_uid((namespace, pod))
            labels = chain.labels(uid, (namespace, pod))
            if self.pod_uid and uid:
                labels = (("pod_uid", uid), *labels)
            quota = chain.requested(ckey)
            ref = ContainerRef(
                namespace,
                pod,
                container,
                pod_uid=uid,
                labels=labels,
                requested_memory_bytes=None if quota is None else quota.memory_bytes,
                requested_compute_ratio=None if quota is None else quota.compute_ratio,
                owner=chain.owner((namespace, pod)),
            )
            cache[ckey] = ref
        return ref


_Row = TypeVar("_Row")


def _breakdown(
    kind: Callable[..., _Row],
    usage: Mapping[UsageKey, _Acc],
    ledger: EnergyLedger,
    now: float,
    owner: Callable[[ContainerKey], tuple[Any, ...]],
) -> tuple[_Row, ...]:
    """A breakdown of the unattributed share (plain containers, Slurm job steps), sorted: one row per
    (owner, device) with processes, the owner's fields first (``owner`` maps the key to them), then
    what its processes add up to and its energy share from ``ledger``, whose idle entries expire."""
    rows: list[_Row] = []
    for key in sorted(usage, key=_sort_key):
        box, gpu, mig = key
        acc = usage[key]
        utilization = acc.utilization()
        energy = None if utilization is None else ledger.pod_total(key)
        rows.append(
            kind(
                *owner(box),
                gpu_uuid=gpu,
                mig_uuid=mig,
                memory_used_bytes=acc.memory,
                utilization_ratio=utilization,
                processes=acc.processes,
                energy_joules_total=energy,
            )
        )
    ledger.touch(usage.keys(), (), now)
    ledger.expire(now, ())
    return tuple(rows)


class _Named:
    """What the chain answered about each container, kept while the chain is the same object.

    A chain is immutable (its views are the answers of one refresh, swapped in whole), so a
    container's reference (namespace, pod, labels, requests) and a plain container's name
    cannot change until the next refresh builds a new chain: looked up once per container
    per refresh, not once per cycle. Bounded: emptied with each new chain, and at
    :data:`MAX_NAMED` entries (a chain that stays while containers churn)."""

    __slots__ = ("_chain", "_plain", "_refs")

    def __init__(self) -> None:
        self._chain: Chain | None = None
        self._refs: dict[ContainerKey, ContainerRef] = {}
        self._plain: dict[ContainerKey, str] = {}

    def _check(self, chain: Chain) -> None:
        if chain is not self._chain or len(self._refs) + len(self._plain) >= MAX_NAMED:
            self._chain = chain
            self._refs = {}
            self._plain = {}

    def refs(self, chain: Chain) -> dict[ContainerKey, ContainerRef]:
        """(namespace, pod, container) -> its reference, for this chain."""
        self._check(chain)
        return self._refs

    def plain_names(self, chain: Chain) -> dict[ContainerKey, str]:
        """(runtime, container ID, namespace) -> the plain container's name, for this chain."""
        self._check(chain)
        return self._plain


MAX_NAMED = 65_536


def _allocated(snapshot: Snapshot, chain: Chain) -> dict[UsageKey, Allocation]:
    """(container, device key) -> its allocation, for every allocation naming a device NVML sees here
    (the first source's where two name the same device)."""
    allocated: dict[UsageKey, Allocation] = {}
    if chain.allocations:
        index = DeviceIndex(snapshot)
        for a in chain.allocations:
            for ref in a.devices:
                dkey = index.resolve(ref)
                if dkey is not None:
                    allocated.setdefault(((a.namespace, a.pod, a.container), dkey[0], dkey[1]), a)
    return allocated


def unattributed_memory(snapshot: Snapshot, usage: Mapping[UsageKey, _Acc]) -> dict[DeviceKey, int | None]:
    """Per device key: the memory the device reports used that no pod's processes hold.

    A MIG instance: its used memory minus its pods'. The whole GPU: its used memory
    minus every pod's on it and minus what its instances' entries already hold, so
    the entries of one GPU partition it: Σ pods + Σ unattributed = device used.
    Never below 0 (process and device memory are read at slightly different
    instants); None where the device (or instance) gave no memory reading.
    """
    pods: dict[DeviceKey, int] = {}
    per_gpu: dict[str, int] = {}
    for (_, gpu, instance), acc in usage.items():
        pods[(gpu, instance)] = pods.get((gpu, instance), 0) + acc.memory
        per_gpu[gpu] = per_gpu.get(gpu, 0) + acc.memory
    out: dict[DeviceKey, int | None] = {}
    for dev in snapshot.devices:
        on_gpu = per_gpu.get(dev.uuid, 0)
        in_instances = 0
        for mig in dev.mig:
            used = mig.memory_used_bytes
            rest = None if used is None else max(0, used - pods.get((dev.uuid, mig.uuid), 0))
            out[(dev.uuid, mig.uuid)] = rest
            in_instances += rest or 0
        used = dev.memory_used_bytes
        out[(dev.uuid, None)] = None if used is None else max(0, used - on_gpu - in_instances)
    return out


def _sort_key(key: UsageKey) -> tuple[str, str, str, str, str]:
    (namespace, pod, container), gpu, mig = key
    return (namespace, pod, container, gpu, mig or "")
