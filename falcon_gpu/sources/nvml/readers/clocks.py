"""SM and memory clocks (MHz -> Hz) and the active clock event (throttle) reasons.

``nvmlDeviceGetCurrentClocksEventReasons`` replaced ``...ThrottleReasons`` in
newer drivers; the bit layout is the same (``CLOCK_EVENT_REASONS`` order).

The SM clock moves with load and power every cycle and is asked every cycle. The memory
clock does not: it is set by the performance state (P0 runs the memory at its maximum,
lower P-states at theirs), so it is re-read when the P-state the thermal_power reader read
this cycle differs from the one of its last read, and at least once a minute
(:mod:`falcon_gpu.sources.nvml.slow`) so that a locked memory clock (``nvidia-smi -lmc``,
which holds the clock within a P-state) is seen within 60 s. Where the P-state is unknown it
is asked every cycle.

The clock event reasons (a bit mask) are not asked every cycle either. Its limiter bits (SW power cap,
HW slowdown, sync boost, SW and HW thermal slowdown, HW power brake) hold the clocks down, and the time
any limiter does so is counted by the driver in two field values of the GPU's one batch:
``NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS`` and ``..._TOTAL_BASE_CLOCKS`` (field IDs 80 and 81; nvml.h's
``nvmlPerfPolicyType_t``: "Total time the GPU was held below application clocks by any limiter" and
"Total time the GPU was held below base clocks", violation times in nanoseconds). A limiter that comes on
moves them; the idle bit follows the GPU utilisation (0 or not), the applications-clocks bit the SM clock.
So the mask is asked again when (those counters, the SM clock, whether the utilisation is 0) differ from
their values at its last ask, then until two answers agree, every cycle while its last answer held a
limiter bit (the counters move as long as it lasts: the cycle it ends shows at once), and at least once a
minute (:meth:`~falcon_gpu.sources.nvml.slow.SlowReadings.follows`). Where the counters, the SM clock or
the utilisation are not known (NOT_SUPPORTED, a failure, MIG) it is asked every cycle. Two safety nets:
a limiter the counters might not count still holds the SM clock down, which is in the token; and the
"any limiter" of the app-clocks counter includes the low-utilisation policy (nvml.h's policies 0-5), so
a lightly loaded GPU may move it every cycle: the mask is then asked every cycle, as before, not less.
"""

from __future__ import annotations

import pynvml

from falcon_gpu.model.snapshot import CLOCK_EVENT_REASONS
from falcon_gpu.readings.device import BY_FIELD
from falcon_gpu.readings.spec import multiplier_from_nvml
from falcon_gpu.sources.nvml.calls import ABSENT, Variant
from falcon_gpu.sources.nvml.field_values import THROTTLE_TIME, FieldGroup
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields

_HZ_PER_MHZ, _MEMORY_HZ_PER_MHZ = (
    multiplier_from_nvml(BY_FIELD["sm_clock_hertz"]),
    multiplier_from_nvml(BY_FIELD["memory_clock_hertz"]),
)
"""MHz -> Hz (the reading table's units): NVML's integer times the exact constant, the float
``from_nvml`` computes, without its call."""
_REASONS: tuple[Variant, ...] = (
    ("events", "nvmlDeviceGetCurrentClocksEventReasons", {}),
    ("throttle", "nvmlDeviceGetCurrentClocksThrottleReasons", {}),
)


_THROTTLE = FieldGroup(THROTTLE_TIME)
_LIMITERS = sum(
    1 << CLOCK_EVENT_REASONS.index(name)
    for name in ("sw_power_cap", "hw_slowdown", "sync_boost", "sw_thermal", "hw_thermal", "hw_power_brake")
)
"""The mask bits of the limiters the throttle counters count."""


def _limited(mask: object) -> bool:
    return isinstance(mask, int) and bool(mask & _LIMITERS)


_EVENTS = "clock_event_reasons"
"""The mask's not-supported key and variant family."""
_MASKS_KEPT = 1024
"""At most this many masks' reason sets kept per source (a mask is a bit set: a driver could in principle
answer any; a GPU shows a handful, asked every cycle)."""


def reasons_from_mask(mask: int) -> frozenset[str]:
    return frozenset(name for bit, name in enumerate(CLOCK_EVENT_REASONS) if mask & (1 << bit))


def _reasons(ctx: DeviceContext, mask: int) -> frozenset[str]:
    """:func:`reasons_from_mask`, each mask's set built once per source (kept in its caller's memo)."""
    by_mask: dict[int, frozenset[str]] = ctx.nvml.memo.setdefault(_EVENTS, {})
    found = by_mask.get(mask)
    if found is None:
        found = reasons_from_mask(mask)
        if len(by_mask) < _MASKS_KEPT:
            by_mask[mask] = found
    return found


def read_clocks(ctx: DeviceContext) -> Fields:
    nvml, scope, h, fields = ctx.nvml, ctx.scope, ctx.handle, ctx.fields
    call = nvml.call
    out: Fields = {}
    sm = call(scope, "sm_clock", "nvmlDeviceGetClockInfo", h, pynvml.NVML_CLOCK_SM)
    if sm is not ABSENT:
        out["sm_clock_hertz"] = sm * _HZ_PER_MHZ
    pstate = fields.get("performance_state")
    if pstate is None:
        mem = call(scope, "memory_clock", "nvmlDeviceGetClockInfo", h, pynvml.NVML_CLOCK_MEM)
    else:
        mem = ctx.slow.call(nvml, ctx.timestamp, scope, "memory_clock", "nvmlDeviceGetClockInfo", h,
                            pynvml.NVML_CLOCK_MEM, token=pstate)  # fmt: skip
    if mem is not ABSENT:
        out["memory_clock_hertz"] = mem * _MEMORY_HZ_PER_MHZ
    batch = ctx.field_values
    app, base = batch.values(_THROTTLE)
    utilization = fields.get("utilization_ratio")
    if app is None or base is None or sm is ABSENT or utilization is None:
        mask = nvml.call_first(scope, _EVENTS, _EVENTS, _REASONS, h)
    else:
        token = (app, base, sm, utilization == 0)
        mask = ctx.slow.follows(nvml, ctx.timestamp, scope, _EVENTS, token, _limited,
                                nvml.call_first, scope, _EVENTS, _EVENTS, _REASONS, h)  # fmt: skip
    if mask is not ABSENT:
        out["clock_event_reasons"] = _reasons(ctx, int(mask))
    return out
