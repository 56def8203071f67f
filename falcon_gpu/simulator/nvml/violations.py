"""The simulated throttle counters: ``NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS`` / ``..._BASE_CLOCKS``.

A driver counts the nanoseconds its clocks were held below the application (and base) clocks by any
limiter. A scenario has no such counter, only the clock event reasons (one mask for the whole run). So
a device whose mask holds a limiter bit (SW power cap, HW slowdown, sync boost, SW or HW thermal
slowdown, HW power brake) has been held down one second in every cycle so far, cycle 0 included; any
other device never was. Both fields answer that count; NOT_SUPPORTED where the scenario has no mask (or
switches it off), as the mask itself.
"""

from __future__ import annotations

from typing import Any

import pynvml

from falcon_gpu.model.snapshot import CLOCK_EVENT_REASONS

LIMITERS = frozenset(
    {"sw_power_cap", "hw_slowdown", "sync_boost", "sw_thermal", "hw_thermal", "hw_power_brake"}
)
"""The reasons that hold the clocks below the application clocks (the others: idle, a clock setting)."""
NS_PER_CYCLE = 1_000_000_000
FIELD_IDS = (
    pynvml.NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS,
    pynvml.NVML_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS,
)
assert set(CLOCK_EVENT_REASONS) >= LIMITERS


def nanoseconds(reasons: tuple[str, ...] | None, supported: bool, cycle: int) -> int:
    """The counter in ``cycle`` of a device whose mask is ``reasons``."""
    if reasons is None or not supported:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    return 0 if LIMITERS.isdisjoint(reasons) else NS_PER_CYCLE * (cycle + 1)


def advancing(gpu: Any) -> bool:
    """Whether the counters of ``gpu`` (a ``GpuScenario``) move from cycle to cycle: a simulator that
    keeps a device's answers once its scenario stops changing must not keep this device's."""
    reasons = gpu.clock_event_reasons
    return reasons is not None and gpu.supports("clock_event_reasons") and not LIMITERS.isdisjoint(reasons)


def serve(sim: Any, dev: Any) -> tuple[int, int]:
    """A field-values server (``device.FIELD_VALUES``): (value type, device ``dev``'s counter)."""
    gpu = dev.gpu
    ns = nanoseconds(gpu.clock_event_reasons, gpu.supports("clock_event_reasons"), sim.cycle)
    return pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, ns
