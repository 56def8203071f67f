"""Temperatures, power, energy, performance state and fan.

The table reads the GPU temperature, the memory temperature, the T.Limit temperatures, the energy
counter, the enforced power limit (an administrator's setting, re-read once a minute) and the fan
(:mod:`falcon_gpu.sources.nvml.readers.table`). ``nvmlDeviceGetFanSpeed`` answers the fan's *intended*
speed (nvml.h: "the intended operating speed of the device's fan"; a blocked fan does not change it),
which the fan controller sets from the GPU temperature: the table row follows the temperature. Most
data-centre boards have no fan: NOT_SUPPORTED once, then never asked again.

Hooks here: the power draw, from the batched field values (``NVML_FI_DEV_POWER_AVERAGE`` else
``..._POWER_INSTANT``): the 1 s average where the GPU has it, the instant value otherwise, which is what
``nvmlDeviceGetPowerUsage`` answers on each generation, and that call where the driver has neither
field; and the performance state, whose 32 means unknown.
"""

from __future__ import annotations

from falcon_gpu.readings.device import BY_FIELD
from falcon_gpu.readings.spec import divisor_from_nvml
from falcon_gpu.sources.nvml.calls import ABSENT
from falcon_gpu.sources.nvml.field_values import POWER_AVERAGE, POWER_INSTANT, FieldGroup
from falcon_gpu.sources.nvml.readers.base import DeviceContext, Fields
from falcon_gpu.sources.nvml.readers.table import TableRows, read_table, table_call

PSTATE_UNKNOWN = 32
_PSTATE = table_call("performance_state")
TABLE = TableRows("thermal_power")
_MW_PER_W = divisor_from_nvml(BY_FIELD["power_watts"])
"""mW -> W (the reading table's units): NVML's integer divided by the exact constant, the float
``from_nvml`` computes, without its call."""
_AVERAGE, _INSTANT = FieldGroup((POWER_AVERAGE,)), FieldGroup((POWER_INSTANT,))
"""The 1 s average; the instant power (or its call), asked where the GPU has no 1 s average."""


def read_thermal_power(ctx: DeviceContext) -> Fields:
    out = read_table(ctx, TABLE)
    batch = ctx.field_values
    (power,) = batch.values(_AVERAGE)
    if power is None:  # no 1 s average (it has no call of its own): the instant value or its call
        (power,) = batch.values(_INSTANT)
    if power is not None:
        out["power_watts"] = power / _MW_PER_W
    pstate = ctx.nvml.call(ctx.scope, "performance_state", _PSTATE, ctx.handle)
    if pstate is not ABSENT and int(pstate) != PSTATE_UNKNOWN:
        out["performance_state"] = int(pstate)
    return out
