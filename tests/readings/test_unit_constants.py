"""The exact constants the readers divide or multiply by on their hot path compute the very float the
unit converters (and each reading's ``from_nvml``) compute, and refuse a conversion that is not one such
operation, so that a change to the table cannot slip a wrong constant into a reader."""

from __future__ import annotations

import pytest

from falcon_gpu.readings.device import BY_FIELD
from falcon_gpu.readings.spec import divisor_from_nvml, multiplier_from_nvml
from falcon_gpu.readings.units import (
    BYTES,
    CELSIUS,
    HERTZ,
    JOULES,
    KIB,
    MEGAHERTZ,
    MILLIJOULES,
    MILLIWATTS,
    PERCENT,
    PERCENT_PER_RATIO,
    RATIO,
    WATTS,
    converter,
    divisor,
    multiplier,
)

NUMBERS = [0, 1, 7, 99, 100, 333, 350_500, 1_234_567, 4_294_967_295, (1 << 53) + 1, (1 << 63) + 5, 0.5, 61.25]
"""NVML's answers: ints up to a 64-bit counter (beyond 2**53 too), and a few floats."""


@pytest.mark.parametrize("value", NUMBERS)
def test_the_constants_give_the_converters_float(value: float) -> None:
    for field in ("power_watts", "power_limit_watts", "energy_joules"):
        reading = BY_FIELD[field]
        got = value / divisor_from_nvml(reading)
        assert got == reading.from_nvml(value) and type(got) is float
    for field in ("sm_clock_hertz", "memory_clock_hertz"):
        reading = BY_FIELD[field]
        got = value * multiplier_from_nvml(reading)
        assert got == reading.from_nvml(value) and type(got) is float
    ratio = value / PERCENT_PER_RATIO
    assert ratio == converter(PERCENT, RATIO)(float(value)) and type(ratio) is float
    assert value / divisor(MILLIWATTS, WATTS) == converter(MILLIWATTS, WATTS)(value)
    assert value * multiplier(MEGAHERTZ, HERTZ) == converter(MEGAHERTZ, HERTZ)(value)


def test_the_constants_are_the_units_own() -> None:
    assert PERCENT_PER_RATIO == 100.0
    assert divisor_from_nvml(BY_FIELD["power_watts"]) == 1000.0
    assert divisor_from_nvml(BY_FIELD["energy_joules"]) == 1000.0
    assert multiplier_from_nvml(BY_FIELD["sm_clock_hertz"]) == 1e6
    assert divisor(BYTES, KIB) == 1024.0 and multiplier(KIB, BYTES) == 1024.0
    assert multiplier(JOULES, MILLIJOULES) == 1000.0


def test_a_conversion_that_is_not_one_operation_is_refused() -> None:
    with pytest.raises(ValueError, match="not a division"):
        divisor(MEGAHERTZ, HERTZ)  # a multiplication
    with pytest.raises(ValueError, match="not a multiplication"):
        multiplier(MILLIWATTS, WATTS)  # a division
    with pytest.raises(ValueError, match="not a division"):
        divisor(CELSIUS, CELSIUS)  # no conversion: an int would stay an int
    with pytest.raises(ValueError, match="not a division"):
        divisor(KIB, MEGAHERTZ)  # not the same base unit
    with pytest.raises(ValueError, match="not a float reading"):
        divisor_from_nvml(BY_FIELD["performance_state"])


def test_from_nvml_is_the_type_itself_where_the_units_are_one() -> None:
    slowdown = BY_FIELD["slowdown_tlimit_celsius"]
    assert slowdown.from_nvml is float and slowdown.from_nvml(-2) == -2.0
    assert BY_FIELD["power_watts"].from_nvml(350_500) == 350.5
