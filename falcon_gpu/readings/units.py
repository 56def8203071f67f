"""Units: the one place a number changes unit (NVML's, the scenario's, the snapshot's, a schema's).

The snapshot holds base units (bytes, watts, joules, hertz, ratios 0-1, degrees Celsius),
NVML answers in its own (mW, mJ, MHz, percent, KiB), dcgm-exporter and gpu-mon publish
theirs (MiB, MHz, mJ, percent). Every conversion between two of them is built here, once,
as a plain function, so a reader, the simulator, a schema and a test that convert the same
pair of units compute the same float.

A conversion multiplies or divides by an exact constant, never by its inverse
(``mW / 1000``, not ``mW * 0.001``): the inverse of 1000 is not exact in binary, and
``350500 * 0.001`` is ``350.50000000000006``, which would reach a store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import msgspec

Convert = Callable[[float], float]
"""A number in one unit -> the same quantity in another."""


class Unit(msgspec.Struct, frozen=True, gc=False):
    """A unit, as a whole number of its base unit or of which one base unit holds a whole number."""

    symbol: str
    base: str
    """The base unit's symbol (a base unit names itself)."""
    size: float = 1
    """How many base units one of this is (MHz: 1e6 Hz); 1 for the base unit itself."""
    parts: float = 1
    """How many of this make one base unit (mW: 1000 per W); 1 unless smaller than the base."""

    @property
    def is_base(self) -> bool:
        return self.size == 1 and self.parts == 1


BYTES: Final = Unit("bytes", "bytes")
BYTES_PER_SECOND: Final = Unit("bytes/s", "bytes/s")
WATTS: Final = Unit("W", "W")
JOULES: Final = Unit("J", "J")
HERTZ: Final = Unit("Hz", "Hz")
RATIO: Final = Unit("ratio", "ratio")
CELSIUS: Final = Unit("C", "C")
NUMBER: Final = Unit("1", "1")
"""A count or an index (a performance state, a replay counter): no unit to convert."""

KIB: Final = Unit("KiB", "bytes", size=1 << 10)
MIB: Final = Unit("MiB", "bytes", size=1 << 20)
MIB_PER_SECOND: Final = Unit("MiB/s", "bytes/s", size=1 << 20)
MILLIWATTS: Final = Unit("mW", "W", parts=1000)
MILLIJOULES: Final = Unit("mJ", "J", parts=1000)
MEGAHERTZ: Final = Unit("MHz", "Hz", size=1_000_000)
PERCENT: Final = Unit("percent", "ratio", parts=100)
KILOWATT_HOURS: Final = Unit("kWh", "J", size=3_600_000)
"""Energy as the grid bills it and carbon intensities are quoted (gCO2e per kWh)."""


def same(value: float) -> float:
    """No conversion (a unit to itself)."""
    return value


def _times(k: float) -> Convert:
    """``v * k`` as the float's own bound method: a C call, cheaper on the hot path than a lambda."""
    return float(k).__mul__


def _divided_by(k: float) -> Convert:
    """``v / k`` (``k.__rtruediv__(v)``), exact where ``k`` is: never ``v * (1 / k)``."""
    return float(k).__rtruediv__


def _to_base(unit: Unit) -> Convert:
    if unit.size != 1:
        return _times(unit.size)
    if unit.parts != 1:
        return _divided_by(unit.parts)
    return same


def _from_base(unit: Unit) -> Convert:
    if unit.size != 1:
        return _divided_by(unit.size)
    if unit.parts != 1:
        return _times(unit.parts)
    return same


def divisor(source: Unit, target: Unit) -> float:
    """The exact constant ``k`` for which ``converter(source, target)(v)`` is ``v / k`` (mW -> W: 1000):
    a reader's hot path divides by it in place of calling the converter, which computes the same float
    (``v / k`` for an int or a float ``v``) without a call. ValueError where the conversion is not one
    division (a multiplication, or no conversion at all: ``same`` keeps an int an int)."""
    if target.is_base and source.size == 1 and source.parts != 1:
        k = source.parts
    elif source.is_base and target.size != 1 and source.base == target.base:
        k = target.size
    else:
        raise ValueError(f"{source.symbol} -> {target.symbol} is not a division by a constant")
    return float(k)


def multiplier(source: Unit, target: Unit) -> float:
    """The exact constant ``k`` for which ``converter(source, target)(v)`` is ``v * k`` (MHz -> Hz: 1e6);
    ValueError where the conversion is not one multiplication (see :func:`divisor`)."""
    if target.is_base and source.size != 1 and source.base == target.base:
        k = source.size
    elif source.is_base and target.size == 1 and target.parts != 1:
        k = target.parts
    else:
        raise ValueError(f"{source.symbol} -> {target.symbol} is not a multiplication by a constant")
    return float(k)


def converter(source: Unit, target: Unit, digits: int | None = None) -> Convert:
    """The function from ``source`` to ``target`` (same base), rounded to ``digits`` decimals if given.

    Built once (at import, in a table), called per value: no branching left for the hot path."""
    if source.base != target.base:
        raise ValueError(f"cannot convert {source.symbol} to {target.symbol}")
    plain: Convert
    if source == target:
        plain = same
    elif source.is_base:
        plain = _from_base(target)
    elif target.is_base:
        plain = _to_base(source)
    else:
        up, down = _to_base(source), _from_base(target)
        plain = lambda v: down(up(v))  # noqa: E731
    if digits is None:
        return plain
    if plain is same:
        return lambda v: round(v, digits)
    return lambda v: round(plain(v), digits)


PERCENT_PER_RATIO: Final = divisor(PERCENT, RATIO)
"""NVML's percent -> ratio is ``v / PERCENT_PER_RATIO`` (100), what ``converter(PERCENT, RATIO)`` gives."""
