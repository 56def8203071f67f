"""The running agent's advice: what ``falcon-gpu advise`` prints, kept as series.

Fed each cycle with the jobs that finished and (every :data:`EVERY` cycles, or when a job
finished) asked for the advice over the recent records and the jobs still running. Bounded:
the last :data:`PER_WORKLOAD` records of at most :data:`MAX_WORKLOADS` workloads (least recently
seen dropped first), and only records that ended within ``window`` seconds. Between two
computations the previous advice is handed out again (the schema's memo then re-uses its
families), so a cycle with nothing new costs a dictionary lookup. A computation is linear in the
records kept: scripts/bench_advice.py measures it at the bounds (docs/BENCHMARKS.md).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping

from falcon_gpu.advice.placement import DEFAULT_HEADROOM
from falcon_gpu.advice.profiles import MigProfile
from falcon_gpu.advice.summary import advise, workload_key
from falcon_gpu.model.advice import Advice
from falcon_gpu.model.jobs import JobRecord
from falcon_gpu.model.snapshot import Snapshot

EVERY = 10
PER_WORKLOAD = 16
MAX_WORKLOADS = 256
DEFAULT_WINDOW = 7 * 86400.0

Profiles = Callable[[Snapshot], Mapping[str, tuple[MigProfile, ...]]]


class AdviceBook:
    def __init__(
        self,
        *,
        headroom: float = DEFAULT_HEADROOM,
        window: float = DEFAULT_WINDOW,
        recent: Iterable[JobRecord] = (),
        every: int = EVERY,
    ) -> None:
        self.headroom, self.window, self._every = headroom, window, every
        self._records: OrderedDict[tuple[str, str, str], deque[JobRecord]] = OrderedDict()
        self._since = every  # the first cycle computes
        self._advice: tuple[Advice, ...] = ()
        self._memory_total: dict[str, int] = {}
        self.add(sorted(recent, key=lambda r: r.end))

    def add(self, finished: Iterable[JobRecord]) -> None:
        for r in finished:
            key = workload_key(r)
            kept = self._records.get(key)
            if kept is None:
                kept = self._records[key] = deque(maxlen=PER_WORKLOAD)
            kept.append(r)
            self._records.move_to_end(key)
            self._since = self._every  # recompute now
        while len(self._records) > MAX_WORKLOADS:
            self._records.popitem(last=False)

    def observe(
        self,
        snapshot: Snapshot,
        finished: tuple[JobRecord, ...],
        running: Callable[[], list[JobRecord]],
        profiles: Profiles | None,
    ) -> tuple[Advice, ...]:
        """This cycle's advice (the previous one unless due)."""
        self.add(finished)
        self._since += 1
        if self._since < self._every or not snapshot.nvml_ok:
            return self._advice
        self._since = 0
        for dev in snapshot.devices:
            if dev.memory_total_bytes:
                self._memory_total.setdefault(dev.name, dev.memory_total_bytes)
        cutoff = snapshot.timestamp - self.window
        for key in [k for k, rs in self._records.items() if rs[-1].end < cutoff]:
            del self._records[key]
        past = ((r, False) for rs in self._records.values() for r in rs if r.end >= cutoff)
        now = ((r, True) for r in running())
        known = profiles(snapshot) if profiles is not None else {}
        self._advice = tuple(advise([*past, *now], known, self._memory_total, self.headroom))
        return self._advice
