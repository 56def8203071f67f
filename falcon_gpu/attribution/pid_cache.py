"""A bounded per-PID cache of cgroup identities, so a cycle reads procfs only for new PIDs.

Reading ``/proc/<pid>/cgroup`` is cheap (procfs, no disk), but a node with
hundreds of GPU processes would still read hundreds of files every cycle; the
identity of a process never changes in practice, so it is read once, and with it, for
a process in no pod, its plain container and its Slurm job step (on cgroup v2 plus
``/proc/<pid>/status`` for the uid). Entries
leave the cache when NVML no longer reports the PID (:meth:`PidCache.retain`),
when they are older than ``ttl`` (a reused PID gets re-read) and, as a last
bound, when the cache is full (oldest first).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path

from falcon_gpu.attribution.cgroup import CgroupIdentity, parse_cgroup, read_cgroup_text
from falcon_gpu.attribution.runtime_cgroup import RuntimeContainer, parse_runtime_cgroup
from falcon_gpu.attribution.slurm_cgroup import SlurmStep, parse_slurm_cgroup


class PidCache:
    def __init__(
        self,
        proc_root: Path,
        *,
        ttl: float = 300.0,
        max_entries: int = 65536,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._proc_root = proc_root
        self._ttl = ttl
        self._max = max_entries
        self._clock = clock
        self._entries: OrderedDict[
            int, tuple[float, bool, CgroupIdentity | None, RuntimeContainer | None, SlurmStep | None]
        ] = OrderedDict()
        self.reads = 0
        """procfs reads so far (for tests and the benchmark)."""

    def lookup(self, pid: int) -> CgroupIdentity | None:
        """The pod/container of ``pid`` (None: in no pod, or not visible). Never raises."""
        now = self._clock()
        entry = self._entries.get(pid)
        if entry is not None and now - entry[0] < self._ttl:
            return entry[2]
        text = read_cgroup_text(self._proc_root, pid)
        identity = None if text is None else parse_cgroup(text)
        plain = None if text is None or identity is not None else parse_runtime_cgroup(text)
        slurm = None if text is None or identity is not None else self._slurm(pid, text)
        self.reads += 1
        self._entries[pid] = (now, text is not None, identity, plain, slurm)
        self._entries.move_to_end(pid)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return identity

    def retain(self, pids: Iterable[int]) -> None:
        """Forget every PID not in ``pids`` (the processes NVML reported this cycle)."""
        keep = set(pids)
        for pid in [p for p in self._entries if p not in keep]:
            del self._entries[pid]

    def plain_container(self, pid: int) -> RuntimeContainer | None:
        """The Docker/Podman/containerd container of a process in no pod (from the cache, no I/O)."""
        entry = self._entries.get(pid)
        return None if entry is None else entry[3]

    def slurm_step(self, pid: int) -> SlurmStep | None:
        """The Slurm job step of a process in no pod (from the cache, no I/O)."""
        entry = self._entries.get(pid)
        return None if entry is None else entry[4]

    def _slurm(self, pid: int, text: str) -> SlurmStep | None:
        """The step from the cgroup text; on cgroup v2 (no ``uid_`` in the path) the uid is the real
        uid on the ``Uid:`` line of ``/proc/<pid>/status`` (read once, with the cgroup of a new PID)."""
        step = parse_slurm_cgroup(text)
        if step is None or step.uid is not None:
            return step
        try:
            status = (self._proc_root / str(pid) / "status").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return step
        for line in status.splitlines():
            if line.startswith("Uid:"):
                fields = line.split()
                if len(fields) > 1 and fields[1].isdigit():
                    return SlurmStep(step.job, step.step, int(fields[1]))
        return step

    def was_readable(self, pid: int) -> bool:
        """Whether the last read of ``pid``'s cgroup file succeeded (from the cache, no I/O)."""
        entry = self._entries.get(pid)
        return entry is not None and entry[1]

    def visible(self, pid: int) -> bool:
        """Whether ``<proc_root>/<pid>`` exists: False means no host PID namespace view."""
        return (self._proc_root / str(pid)).exists()

    def __len__(self) -> int:
        return len(self._entries)
