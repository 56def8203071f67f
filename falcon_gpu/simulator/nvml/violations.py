"""The simulated throttle counters: ``NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS`` / ``..._BASE_CLOCKS``.

A driver counts the nanoseconds its clocks were held below the application (and base) clocks by any
limiter. The scenario has no such counter: it has the clock event reasons. So each device's counter
advances by one second of nanoseconds for every cycle in which its mask holds a limiter bit (SW power
cap, HW slowdown, sync boost, SW or HW thermal slowdown, HW power brake), as the mask is when the cycle
is first asked for it; both fields answer that one count. NOT_SUPPORTED where the scenario has no mask
(or switches it off), as the mask itself.
"""

from __future__ import annotations

import weakref
from typing import Any

import pynvml

from falcon_gpu.model.snapshot import CLOCK_EVENT_REASONS

LIMITERS = frozenset(
    {"sw_power_cap", "hw_slowdown", "sync_boost", "sw_thermal", "hw_thermal", "hw_power_brake"}
)
"""The reasons that hold the clocks below the application clocks (the rest: idle, a clock setting)."""
NS_PER_CYCLE = 1_000_000_000
FIELD_IDS = (
    pynvml.NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS,
    pynvml.NVML_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS,
)
assert set(CLOCK_EVENT_REASONS) >= LIMITERS


class Violations:
    """Per device index: (the last cycle counted, the nanoseconds counted up to it)."""

    __slots__ = ("_counted",)

    def __init__(self) -> None:
        self._counted: dict[int, tuple[int, int]] = {}

    def nanoseconds(self, index: int, reasons: tuple[str, ...] | None, supported: bool, cycle: int) -> int:
        """The counter of device ``index`` in ``cycle`` whose mask is ``reasons``."""
        if reasons is None or not supported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        last, total = self._counted.get(index, (-1, 0))
        if cycle > last:
            if not LIMITERS.isdisjoint(reasons):
                total += NS_PER_CYCLE * (cycle - last)
            self._counted[index] = (cycle, total)
        return total


_BY_SIMULATOR: weakref.WeakKeyDictionary[Any, Violations] = weakref.WeakKeyDictionary()
"""Each simulated library's counters (kept beside it, so that the simulator's classes need no field)."""


def serve(sim: Any, dev: Any) -> tuple[int, int]:
    """A field-values server (``device.FIELD_VALUES``): (value type, device ``dev``'s counter)."""
    counters = _BY_SIMULATOR.get(sim)
    if counters is None:
        counters = _BY_SIMULATOR[sim] = Violations()
    gpu = dev.gpu
    supported = gpu.supports("clock_event_reasons")
    return pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, counters.nanoseconds(
        dev.index, gpu.clock_event_reasons, supported, sim.cycle
    )
