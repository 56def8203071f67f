"""Process names by PID: asked of NVML once per PID, kept only while the PID is running.

``nvmlSystemGetProcessName`` is a syscall-backed lookup; names do not change
while a process lives, so the cache is filled once per PID (a failed lookup
included: None is cached too) and kept only for the PIDs seen in the cycle
before (bounded by the running processes, and a reused PID is looked up again
once the old process disappeared). A hard cap guards against a pathological
process count.

Written for the hot path (every process of every GPU asks, some twice a cycle): a
cycle's names live in a dict of their own, a PID's first ask in a cycle moves its
entry over from the previous cycle's dict, and the end of the cycle drops what
was not moved, so no per-PID bookkeeping is left for :meth:`ProcessNames.end_cycle`.
"""

from __future__ import annotations

from falcon_gpu.sources.nvml.calls import ABSENT, NvmlCaller, text

MAX_NAMES = 4096


class ProcessNames:
    def __init__(self, nvml: NvmlCaller, max_names: int = MAX_NAMES) -> None:
        self._nvml = nvml
        self._max = max_names
        self._now: dict[int, str | None] = {}
        """The names asked this cycle."""
        self._before: dict[int, str | None] = {}
        """The names of the previous cycle not asked yet in this one."""

    def get(self, pid: int) -> str | None:
        """The process name, or None when NVML cannot tell (exited, no permission)."""
        now = self._now
        if pid in now:
            return now[pid]
        before = self._before
        if pid in before:
            name = before.pop(pid)
        else:
            value = self._nvml.call("system", "process_name", "nvmlSystemGetProcessName", pid)
            name = None if value is ABSENT else text(value) or None
        if len(now) < self._max:  # a name NVML cannot give is not asked again while the PID lives
            now[pid] = name
        return name

    def held(self, pids: frozenset[int]) -> bool:
        """Keep the names of ``pids`` for this cycle as :meth:`get` would, asking nothing: True where
        every one was known already (asked this cycle or the last, so a reading built from last cycle's
        name still has it); False at the first that was not (the caller asks :meth:`get`)."""
        now, before, room = self._now, self._before, self._max
        if len(now) + len(pids) <= room and before.keys() >= pids:  # the usual cycle: all from the last
            pop = before.pop  # a plain loop: dict.update over zip/map pairs costs more per PID
            for pid in pids:
                now[pid] = pop(pid)
            return True
        for pid in pids:
            if pid not in now:
                if pid not in before or len(now) >= room:
                    return False
                now[pid] = before.pop(pid)
        return True

    def end_cycle(self) -> None:
        """Forget the PIDs not seen in this cycle (exited: a reused PID is asked again)."""
        self._before = self._now
        self._now = {}

    def __len__(self) -> int:
        return len(self._now) + len(self._before)
