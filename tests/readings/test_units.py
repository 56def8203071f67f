"""Unit conversions: exact where the old hand-written ones were, and refused across quantities."""

from __future__ import annotations

import pytest

from falcon_gpu.readings import units
from falcon_gpu.readings.units import converter


@pytest.mark.parametrize(
    ("source", "target", "value", "want"),
    [
        (units.MILLIWATTS, units.WATTS, 350_500, 350.5),  # 350500 * 0.001 would be 350.50000000000006
        (units.WATTS, units.MILLIWATTS, 402.25, 402_250),
        (units.MILLIJOULES, units.JOULES, 1_350_500, 1350.5),
        (units.JOULES, units.MILLIJOULES, 1350.5, 1_350_500),
        (units.MEGAHERTZ, units.HERTZ, 1980, 1_980_000_000),
        (units.HERTZ, units.MEGAHERTZ, 1_410_000_000, 1410),
        (units.PERCENT, units.RATIO, 73, 0.73),
        (units.RATIO, units.PERCENT, 0.5, 50),
        (units.KIB, units.BYTES, 3, 3072),
        (units.BYTES, units.MIB, 3 << 20, 3),
        (units.BYTES_PER_SECOND, units.MIB_PER_SECOND, 1 << 19, 0.5),
        (units.CELSIUS, units.CELSIUS, -8, -8),
    ],
)
def test_a_conversion_gives_the_exact_value(
    source: units.Unit, target: units.Unit, value: float, want: float
) -> None:
    assert converter(source, target)(value) == want


def test_same_unit_is_the_identity_function_and_digits_round() -> None:
    assert converter(units.WATTS, units.WATTS) is units.same
    assert converter(units.RATIO, units.PERCENT, digits=3)(0.123456) == 12.346
    assert converter(units.RATIO, units.PERCENT)(0.123456) == pytest.approx(12.3456)


def test_two_non_base_units_convert_through_the_base() -> None:
    assert converter(units.KIB, units.MIB)(2048) == 2


def test_units_of_different_quantities_do_not_convert() -> None:
    with pytest.raises(ValueError, match="cannot convert mW to J"):
        converter(units.MILLIWATTS, units.JOULES)
