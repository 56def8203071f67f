"""SM and memory clocks (MHz -> Hz), read by the table, and the active clock event (throttle) reasons.

The SM clock moves with load and power every cycle and is asked every cycle. The memory clock does not:
it is set by the performance state (P0 runs the memory at its maximum, lower P-states at theirs), so its
table row follows ``performance_state`` (a locked memory clock, ``nvidia-smi -lmc``, is seen within a
minute). ``nvmlDeviceGetCurrentClocksEventReasons`` replaced ``...ThrottleReasons`` in newer drivers;
the bit layout is the same (``CLOCK_EVENT_REASONS`` order).

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

from falcon_gpu.model.snapshot import CLOCK_EVENT_REASONS
from falcon_gpu.sources.nvml.calls import ABSENT, Variant
from falcon_gpu.sources.nvml.field_values import THROTTLE_TIME, FieldGroup
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields
from falcon_gpu.sources.nvml.readers.table import TableRows, read_table

TABLE = TableRows("clocks")
NEEDS = (*TABLE.needs, "utilization_ratio")
"""What earlier readers must have read this cycle: the P-state the memory clock follows, and the
utilisation the clock event reasons follow."""
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
    """:func:`reasons_from_mask`, each mask's set built once per source (``ctx.state.clock_reasons``)."""
    by_mask = ctx.state.clock_reasons
    found = by_mask.get(mask)
    if found is None:
        found = reasons_from_mask(mask)
        if len(by_mask) < _MASKS_KEPT:
            by_mask[mask] = found
    return found


def read_clocks(ctx: DeviceContext) -> Fields:
    out = read_table(ctx, TABLE)
    nvml, scope, h = ctx.nvml, ctx.scope, ctx.handle
    app, base = ctx.field_values.values(_THROTTLE)
    sm = out.get("sm_clock_hertz")
    utilization = ctx.fields.get("utilization_ratio")
    if app is None or base is None or sm is None or utilization is None:
        mask = nvml.call_first(scope, _EVENTS, _EVENTS, _REASONS, h)
    else:
        token = (app, base, sm, utilization == 0)
        mask = ctx.slow.follows(nvml, ctx.timestamp, scope, _EVENTS, token, _limited,
                                nvml.call_first, scope, _EVENTS, _EVENTS, _REASONS, h)  # fmt: skip
    if mask is not ABSENT:
        out["clock_event_reasons"] = _reasons(ctx, int(mask))
    return out
