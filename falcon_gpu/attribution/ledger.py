"""State that outlives a cycle: energy counters shared out to pods, and allocation idle time.

Energy: each cycle a GPU's energy counter moves by ``delta``; each process's
share of it is its SM share over the sum of SM shares of every process on that
GPU. Pod shares accumulate per (container, GPU, MIG instance); everything else
(unattributed processes' shares, and the whole delta when no process used the
SMs) accumulates as unattributed, so for every GPU the pod totals plus the
unattributed totals equal the device's energy used since the agent started.
The first reading of a GPU, and a counter that went backwards (driver reload),
only set the baseline. A missing reading keeps the old baseline, so the next
delta covers both cycles and nothing is lost.

Bounds: counters not touched for ``retention`` seconds are dropped (a finished
pod's series ends; its energy then no longer appears in the sum); idle timers
are dropped as soon as the kubelet stops listing the allocation.
"""

from __future__ import annotations

from collections.abc import Iterable

DeviceKey = tuple[str, str | None]
ContainerKey = tuple[str, str, str]
UsageKey = tuple[ContainerKey, str, str | None]


class EnergyLedger:
    def __init__(self, retention: float = 600.0) -> None:
        self.retention = retention
        self._baseline: dict[str, float] = {}
        self._pods: dict[UsageKey, float] = {}
        self._unattributed: dict[DeviceKey, float] = {}
        self._pods_touched: dict[UsageKey, float] = {}
        self._unattributed_touched: dict[DeviceKey, float] = {}

    def delta(self, gpu_uuid: str, energy_joules: float | None) -> float | None:
        """Energy used since the previous reading; None on the first reading or a reset."""
        if energy_joules is None:
            return None
        prev = self._baseline.get(gpu_uuid)
        self._baseline[gpu_uuid] = energy_joules
        if prev is None or energy_joules < prev:
            return None
        return energy_joules - prev

    def add_pod(self, key: UsageKey, joules: float, now: float) -> None:
        self._pods[key] = self._pods.get(key, 0.0) + joules
        self._pods_touched[key] = now

    def add_unattributed(self, key: DeviceKey, joules: float, now: float) -> None:
        self._unattributed[key] = self._unattributed.get(key, 0.0) + joules
        self._unattributed_touched[key] = now

    def touch(self, pods: Iterable[UsageKey], devices: Iterable[DeviceKey], now: float) -> None:
        """Mark series present this cycle so they are not expired."""
        for key in pods:
            self._pods_touched[key] = now
        for dkey in devices:
            self._unattributed_touched[dkey] = now

    def pod_total(self, key: UsageKey) -> float:
        return self._pods.get(key, 0.0)

    def unattributed_total(self, key: DeviceKey) -> float:
        return self._unattributed.get(key, 0.0)

    def expire(self, now: float, live_gpus: Iterable[str]) -> None:
        """Drop counters untouched for ``retention`` s, and baselines of GPUs no longer present."""
        cutoff = now - self.retention
        for key in [k for k, t in self._pods_touched.items() if t < cutoff]:
            del self._pods_touched[key]
            self._pods.pop(key, None)
        for dkey in [k for k, t in self._unattributed_touched.items() if t < cutoff]:
            del self._unattributed_touched[dkey]
            self._unattributed.pop(dkey, None)
        live = set(live_gpus)
        for uuid in [u for u in self._baseline if u not in live]:
            del self._baseline[uuid]

    def __len__(self) -> int:
        return len(self._pods) + len(self._unattributed)


class IdleTracker:
    """How long each allocated (container, device) has gone without a process on it."""

    def __init__(self) -> None:
        self._last_used: dict[UsageKey, float] = {}

    def observe(self, key: UsageKey, in_use: bool, now: float) -> float:
        """Record this cycle; return the idle seconds (0 while in use)."""
        if in_use:
            self._last_used[key] = now
            return 0.0
        since = self._last_used.setdefault(key, now)
        return max(0.0, now - since)

    def retain(self, allocated: Iterable[UsageKey]) -> None:
        """Forget allocations the kubelet no longer lists."""
        keep = set(allocated)
        for key in [k for k in self._last_used if k not in keep]:
            del self._last_used[key]

    def __len__(self) -> int:
        return len(self._last_used)
