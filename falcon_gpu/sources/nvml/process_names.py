"""Process names by PID: asked of NVML once per PID, kept only while the PID is running.

``nvmlSystemGetProcessName`` is a syscall-backed lookup; names do not change
while a process lives, so the cache is filled once per PID (a failed lookup
included: None is cached too) and pruned at the end
of every cycle to the PIDs seen in that cycle (bounded by the running processes,
and a reused PID is looked up again once the old process disappeared). A hard
cap guards against a pathological process count.
"""

from __future__ import annotations

from collections import OrderedDict

from falcon_gpu.sources.nvml.calls import ABSENT, NvmlCaller, text

MAX_NAMES = 4096


class ProcessNames:
    def __init__(self, nvml: NvmlCaller, max_names: int = MAX_NAMES) -> None:
        self._nvml = nvml
        self._max = max_names
        self._names: OrderedDict[int, str | None] = OrderedDict()
        self._seen: set[int] = set()

    def get(self, pid: int) -> str | None:
        """The process name, or None when NVML cannot tell (exited, no permission)."""
        self._seen.add(pid)
        if pid in self._names:
            self._names.move_to_end(pid)
            return self._names[pid]
        value = self._nvml.call("system", "process_name", "nvmlSystemGetProcessName", pid)
        name = None if value is ABSENT else text(value) or None
        self._names[pid] = name  # a name NVML cannot give is not asked again while the PID lives
        while len(self._names) > self._max:
            self._names.popitem(last=False)
        return name

    def end_cycle(self) -> None:
        for pid in [p for p in self._names if p not in self._seen]:
            del self._names[pid]
        self._seen.clear()

    def __len__(self) -> int:
        return len(self._names)
