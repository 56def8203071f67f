"""Carbon: the ``carbon_intensity`` setting and the emissions of a quantity of energy.

``carbon_intensity`` is gCO2e per kWh: a number (the agent publishes it as
``falcon_gpu_carbon_intensity_grams_per_kwh`` so the recording rules can multiply energy by it,
and every job record carries its emissions), or the name of a series already in the store (a grid
operator's or Electricity Maps' intensity, changing over the day) that the rules join instead:
the agent cannot read the store, so then its job records carry no emissions and it publishes
nothing for intensity (docs/DASHBOARDS.md, "Energy and carbon per team", says how the rules join it).
"""

from __future__ import annotations

import math
import re
from typing import Final

from falcon_gpu.readings.units import JOULES, KILOWATT_HOURS, converter

_METRIC_NAME: Final = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_KWH: Final = converter(JOULES, KILOWATT_HOURS)

MAX_INTENSITY: Final = 5000.0
"""gCO2e/kWh: the dirtiest grids are near 1000 (lignite about 1100); past 5000 the number is
surely in another unit (kg, or per MWh)."""


def check_carbon_intensity(value: object) -> float | str | None:
    """The setting's value: a number of gCO2e/kWh (0 to 5000; a string of digits counts, as the
    environment gives it) or a Prometheus series name. Raises ValueError saying what is wrong."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"expected gCO2e per kWh (a number) or a series name, got {value!r}")
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text)
        except ValueError:
            if not _METRIC_NAME.fullmatch(text):
                raise ValueError(
                    f"expected gCO2e per kWh (a number) or a Prometheus series name, got {value!r}"
                ) from None
            return text
    if not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= MAX_INTENSITY:
        raise ValueError(f"expected gCO2e per kWh between 0 and {MAX_INTENSITY:g}, got {value!r}")
    return float(value)


def grams_per_kwh(setting: float | str | None) -> float | None:
    """The intensity the agent itself can use: the number, or None (unset, or a series in the store)."""
    return setting if isinstance(setting, float) else None


def emissions_grams(energy_joules: float, intensity: float) -> float:
    """gCO2e of ``energy_joules`` at ``intensity`` gCO2e/kWh, to the milligram."""
    return round(_KWH(energy_joules) * intensity, 3)
