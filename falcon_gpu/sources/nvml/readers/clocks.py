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
"""

from __future__ import annotations

import pynvml

from falcon_gpu.model.snapshot import CLOCK_EVENT_REASONS
from falcon_gpu.readings.device import BY_FIELD
from falcon_gpu.sources.nvml.calls import ABSENT, Variant
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields

_SM_HZ, _MEMORY_HZ = BY_FIELD["sm_clock_hertz"].from_nvml, BY_FIELD["memory_clock_hertz"].from_nvml
"""MHz -> Hz (the reading table's units)."""
_REASONS: tuple[Variant, ...] = (
    ("events", "nvmlDeviceGetCurrentClocksEventReasons", {}),
    ("throttle", "nvmlDeviceGetCurrentClocksThrottleReasons", {}),
)


_BY_MASK: dict[int, frozenset[str]] = {}
"""Each mask's reasons, built once: a GPU shows a handful of masks, asked every cycle."""
_MASKS_KEPT = 1024
"""At most this many masks kept (a mask is a bit set: a driver could in principle answer any)."""


def reasons_from_mask(mask: int) -> frozenset[str]:
    found = _BY_MASK.get(mask)
    if found is None:
        found = frozenset(name for bit, name in enumerate(CLOCK_EVENT_REASONS) if mask & (1 << bit))
        if len(_BY_MASK) < _MASKS_KEPT:
            _BY_MASK[mask] = found
    return found


def read_clocks(ctx: DeviceContext) -> Fields:
    call, scope, h = ctx.nvml.call, ctx.scope, ctx.handle
    out: Fields = {}
    sm = call(scope, "sm_clock", "nvmlDeviceGetClockInfo", h, pynvml.NVML_CLOCK_SM)
    if sm is not ABSENT:
        out["sm_clock_hertz"] = _SM_HZ(sm)
    pstate = ctx.fields.get("performance_state")
    if pstate is None:
        mem = call(scope, "memory_clock", "nvmlDeviceGetClockInfo", h, pynvml.NVML_CLOCK_MEM)
    else:
        mem = ctx.slow.call(ctx.nvml, ctx.timestamp, scope, "memory_clock", "nvmlDeviceGetClockInfo", h,
                            pynvml.NVML_CLOCK_MEM, token=pstate)  # fmt: skip
    if mem is not ABSENT:
        out["memory_clock_hertz"] = _MEMORY_HZ(mem)
    mask = ctx.nvml.call_first(scope, "clock_event_reasons", "clock_event_reasons", _REASONS, h)
    if mask is not ABSENT:
        out["clock_event_reasons"] = reasons_from_mask(int(mask))
    return out
