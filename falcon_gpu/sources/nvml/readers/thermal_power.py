"""Temperatures, power, energy, performance state and fan.

Units: NVML power is mW and energy mJ (-> W, J); the fan is a percent (-> ratio).
The memory temperature has no dedicated call: it is the field value
``NVML_FI_DEV_MEMORY_TEMP``, whose own ``nvmlReturn`` must be checked (the call
succeeds while the field answers NOT_SUPPORTED).
"""

from __future__ import annotations

from typing import Any

import pynvml

from falcon_gpu.sources.nvml.calls import ABSENT
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields, ratio

PSTATE_UNKNOWN = 32

_VALUE_ATTR = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
}


def field_value(ctx: DeviceContext, field: str, field_id: int) -> float | None:
    """One NVML field value as a number, honouring its per-value return code."""
    values = ctx.nvml.call(ctx.scope, field, "nvmlDeviceGetFieldValues", ctx.handle, [field_id])
    if values is ABSENT:
        return None
    value: Any = values[0]
    ret = int(value.nvmlReturn)
    if ret == pynvml.NVML_SUCCESS:
        attr = _VALUE_ATTR.get(int(value.valueType))
        if attr is None:
            ctx.nvml.errors.append(f"{field}: unknown field value type {value.valueType}")
            return None
        return float(getattr(value.value, attr))
    if ret == pynvml.NVML_ERROR_NOT_SUPPORTED:
        ctx.nvml.mark_not_supported(ctx.scope, field)
    elif ret != pynvml.NVML_ERROR_NOT_FOUND:
        ctx.nvml.errors.append(f"{field}: field {field_id} answered NVML error code {ret}")
    return None


def read_thermal_power(ctx: DeviceContext) -> Fields:
    call, scope, h = ctx.nvml.call, ctx.scope, ctx.handle
    out: Fields = {}
    temp = call(scope, "temperature", "nvmlDeviceGetTemperature", h, pynvml.NVML_TEMPERATURE_GPU)
    if temp is not ABSENT:
        out["temperature_celsius"] = float(temp)
    out["memory_temperature_celsius"] = field_value(ctx, "memory_temperature", pynvml.NVML_FI_DEV_MEMORY_TEMP)
    power = call(scope, "power", "nvmlDeviceGetPowerUsage", h)
    if power is not ABSENT:
        out["power_watts"] = power / 1000.0
    limit = call(scope, "power_limit", "nvmlDeviceGetEnforcedPowerLimit", h)
    if limit is not ABSENT:
        out["power_limit_watts"] = limit / 1000.0
    energy = call(scope, "energy", "nvmlDeviceGetTotalEnergyConsumption", h)
    if energy is not ABSENT:
        out["energy_joules"] = energy / 1000.0
    pstate = call(scope, "performance_state", "nvmlDeviceGetPerformanceState", h)
    if pstate is not ABSENT and int(pstate) != PSTATE_UNKNOWN:
        out["performance_state"] = int(pstate)
    fan = call(scope, "fan_speed", "nvmlDeviceGetFanSpeed", h)
    if fan is not ABSENT:
        out["fan_speed_ratio"] = ratio(fan)
    return out
