"""Temperatures, power, energy, performance state and fan.

Units: NVML power is mW and energy mJ (-> W, J); the fan is a percent (-> ratio).
The memory temperature, the power and the energy counter come from the device's
batched field values (``NVML_FI_DEV_MEMORY_TEMP``, ``..._POWER_AVERAGE`` else
``..._POWER_INSTANT``, ``..._TOTAL_ENERGY_CONSUMPTION``; see
:mod:`falcon_gpu.sources.nvml.field_values`): the 1 s average where the GPU has it,
the instant value otherwise, which is what ``nvmlDeviceGetPowerUsage`` answers on
each generation, and that call where the driver has neither field. The enforced
power limit is an administrator's setting, re-read once a minute (:mod:`falcon_gpu.sources.nvml.slow`).

``nvmlDeviceGetFanSpeed`` answers the fan's *intended* speed (nvml.h: "the intended
operating speed of the device's fan"; a blocked fan does not change it), which the fan
controller sets from the GPU temperature: it is re-read when the temperature read this
cycle differs from the one of its last read, and at least once a minute (a manual fan
setting is seen within 60 s). Most data-centre boards have no fan: NOT_SUPPORTED once,
then never asked again.
"""

from __future__ import annotations

import pynvml

from falcon_gpu.readings.device import BY_FIELD
from falcon_gpu.readings.spec import divisor_from_nvml
from falcon_gpu.readings.units import PERCENT_PER_RATIO
from falcon_gpu.sources.nvml.calls import ABSENT
from falcon_gpu.sources.nvml.field_values import (
    ENERGY,
    MEMORY_TEMP,
    POWER_AVERAGE,
    POWER_INSTANT,
    FieldGroup,
)
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields
from falcon_gpu.sources.nvml.readers.declared import Declared, read_declared

PSTATE_UNKNOWN = 32
_DECLARED = Declared("thermal_power")
_MW_PER_W, _LIMIT_MW_PER_W, _MJ_PER_J = (
    divisor_from_nvml(BY_FIELD[f]) for f in ("power_watts", "power_limit_watts", "energy_joules")
)
"""mW -> W, mJ -> J (the reading table's units): NVML's integer divided by the exact constant, the float
``from_nvml`` computes, without its call."""
_GROUP = FieldGroup((MEMORY_TEMP, POWER_AVERAGE, ENERGY))
_INSTANT = FieldGroup((POWER_INSTANT,))
"""The instant power (or its call), asked where the GPU has no 1 s average."""


def read_thermal_power(ctx: DeviceContext) -> Fields:
    nvml, scope, h, batch = ctx.nvml, ctx.scope, ctx.handle, ctx.field_values
    call = nvml.call
    out = read_declared(ctx, _DECLARED)
    memory_temp, power, energy = batch.values(_GROUP)
    temp = call(scope, "temperature", "nvmlDeviceGetTemperature", h, pynvml.NVML_TEMPERATURE_GPU)
    if temp is not ABSENT:
        out["temperature_celsius"] = float(temp)
    out["memory_temperature_celsius"] = None if memory_temp is None else float(memory_temp)
    if power is None:  # no 1 s average (it has no call of its own): the instant value or its call
        (power,) = batch.values(_INSTANT)
    if power is not None:
        out["power_watts"] = power / _MW_PER_W
    limit = ctx.slow.call(nvml, ctx.timestamp, scope, "power_limit", "nvmlDeviceGetEnforcedPowerLimit", h)
    if limit is not ABSENT:
        out["power_limit_watts"] = limit / _LIMIT_MW_PER_W
    if energy is not None:
        out["energy_joules"] = energy / _MJ_PER_J
    pstate = call(scope, "performance_state", "nvmlDeviceGetPerformanceState", h)
    if pstate is not ABSENT and int(pstate) != PSTATE_UNKNOWN:
        out["performance_state"] = int(pstate)
    if temp is ABSENT:
        fan = call(scope, "fan_speed", "nvmlDeviceGetFanSpeed", h)
    else:
        fan = ctx.slow.call(nvml, ctx.timestamp, scope, "fan_speed", "nvmlDeviceGetFanSpeed", h, token=temp)
    if fan is not ABSENT:
        out["fan_speed_ratio"] = fan / PERCENT_PER_RATIO
    return out
