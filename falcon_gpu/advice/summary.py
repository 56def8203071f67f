"""Job records folded into one line per workload, and the advice for it.

A workload (:mod:`.workload`) is keyed by namespace, name and GPU model (advice is in that
model's profiles). Its figures are over all its jobs (one per container, GPU and pod life): the
memory peak is the largest; the p95s are the largest job p95 (a bound, not a p95 of the union:
records keep no samples); the SM share is of the whole GPU (a MIG job's share of its instance
times the instance's SMs over the GPU's). ``gpus`` is how many GPUs (or MIG instances, as
shares of a GPU) it held at once: the most its one pod had. A Slurm job's records (no namespace,
the job's name as the workload) count as its pods: ``pods`` is then how many Slurm jobs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from falcon_gpu.advice.placement import DEFAULT_HEADROOM, Need, held_fraction, smallest
from falcon_gpu.advice.profiles import MigProfile, simple
from falcon_gpu.advice.workload import workload_of
from falcon_gpu.model.advice import Advice
from falcon_gpu.model.jobs import JobRecord


def _sm_of_gpu(r: JobRecord, profiles: tuple[MigProfile, ...]) -> float | None:
    ratio = r.sm_active_p95_ratio if r.sm_active_p95_ratio is not None else r.utilization_max_ratio
    if ratio is None or r.mig_profile is None:
        return ratio
    plain = simple(profiles)
    short = r.mig_profile.removeprefix("MIG ").lower()
    mine = next((p for p in profiles if p.name == short), None)
    full = max((p.multiprocessors for p in plain), default=0)
    return ratio * mine.multiprocessors / full if mine is not None and full else ratio


def workload_key(r: JobRecord) -> tuple[str, str, str]:
    return (r.namespace, r.workload or workload_of(r.pod, r.container), r.gpu_model)


def advise(
    records: Iterable[tuple[JobRecord, bool]],
    profiles: Mapping[str, tuple[MigProfile, ...]],
    memory_total: Mapping[str, int],
    headroom: float = DEFAULT_HEADROOM,
) -> list[Advice]:
    """``records``: (record, still running). ``memory_total``: GPU model -> its memory."""
    groups: dict[tuple[str, str, str], list[tuple[JobRecord, bool]]] = defaultdict(list)
    for r, running in records:
        groups[workload_key(r)].append((r, running))
    out = []
    for (ns, name, model), jobs in groups.items():
        mine = profiles.get(model, ())
        recs = [r for r, _ in jobs]
        sms = [s for r in recs if (s := _sm_of_gpu(r, mine)) is not None]
        need = Need(
            memory_peak_bytes=max(r.memory_max_bytes for r in recs),
            memory_p95_bytes=max(
                r.memory_p95_bytes if r.memory_p95_bytes is not None else r.memory_max_bytes for r in recs
            ),
            sm_p95_ratio=max(sms) if sms else None,
        )
        by_pod: dict[str, list[JobRecord]] = defaultdict(list)
        for r in recs:
            by_pod[r.pod if r.slurm_job is None else r.slurm_job].append(r)
        placement = smallest(need, memory_total.get(model), mine, headroom)
        held, slots = _at_once(by_pod.values(), mine)
        out.append(
            Advice(
                namespace=ns,
                workload=name,
                model=model,
                pods=len(by_pod),
                jobs=len(recs),
                memory_peak_bytes=need.memory_peak_bytes,
                memory_p95_bytes=need.memory_p95_bytes,
                sm_p95_ratio=need.sm_p95_ratio,
                duration_seconds=sum(max(r.duration_seconds for r in rs) for rs in by_pod.values()),
                running=any(running for _, running in jobs),
                held=held,
                placement=placement,
                recommended=slots * placement.fraction,
            )
        )
    return sorted(out, key=lambda a: (a.namespace, a.workload, a.model))


def _at_once(pods: Iterable[list[JobRecord]], profiles: tuple[MigProfile, ...]) -> tuple[float, int]:
    """The most GPU (share) its pods held at the same time, and how many GPUs or instances that was:
    a pod holds its GPUs from its first job's start to its last job's end; restarts do not overlap
    (the next pod's first cycle comes after the last one's), replicas do."""
    edges: list[tuple[float, int, float, int]] = []
    for rs in pods:
        slots = {(x.gpu_uuid, x.mig_uuid): x for x in rs}
        share = sum(held_fraction(r.mig_profile, profiles) for r in slots.values())
        start, end = min(r.start for r in rs), max(r.end for r in rs)
        edges += [(start, 0, share, len(slots)), (end, 1, -share, -len(slots))]
    held = best = 0.0
    count = most = 0
    for _, _, share, n in sorted(edges):  # at one instant, a start comes before an end
        held, count = held + share, count + n
        best, most = max(best, held), max(most, count)
    return best, most


def gpus_freed(advice: Iterable[Advice]) -> int:
    """Whole GPUs that taking every advice would free: per model, the GPUs held now (rounded up)
    less those the recommended placements need (rounded up, as if they packed perfectly)."""
    held: dict[str, float] = defaultdict(float)
    wanted: dict[str, float] = defaultdict(float)
    for a in advice:
        held[a.model] += a.held
        wanted[a.model] += a.recommended
    return sum(max(0, _ceil(held[m]) - _ceil(wanted[m])) for m in held)


def _ceil(x: float) -> int:
    """Rounded up, ignoring float noise (7 x 1/7 is 1, not 2)."""
    return int(-(-round(x, 6) // 1))
