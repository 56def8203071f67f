"""What one reading is, everywhere it appears: the :class:`Reading` record.

A reading is declared once (in :mod:`falcon_gpu.readings.device`) with its snapshot field and
type, its base unit, where NVML has it, the scenario key the simulator serves it from, and how
each schema publishes it. The NVML source, the simulator, the schemas and the tests take
what they need from that one record; the conversions between its units are built here, once
(:mod:`falcon_gpu.readings.units`), not in each of them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any, Final, Literal

import msgspec
import pynvml

from falcon_gpu.readings.units import Convert, Unit, converter, divisor, multiplier, same

SchemaName = Literal["falcon_gpu", "dcgm", "openfalcon", "nvidia_smi"]
SCHEMAS: Final[tuple[SchemaName, ...]] = ("falcon_gpu", "dcgm", "openfalcon", "nvidia_smi")

UINT: Final = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
ULL: Final = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
SINT: Final = pynvml.NVML_VALUE_TYPE_SIGNED_INT


MetricKind = Literal["gauge", "counter"]
"""A series' type (the same literal as :data:`falcon_gpu.model.samples.MetricKind`: the table sits below
``model/``, whose ``DeviceReading`` is built from it)."""


class Refresh(msgspec.Struct, frozen=True, gc=False):
    """How often a reading is asked: ``cycle`` (every cycle), ``setting`` (an administrator's setting:
    once a minute), ``follows`` (asked again as soon as the reading ``after`` changed, then until two
    answers agree, and at least once a minute: it is set by that reading), ``gated`` (zero unless
    ``after``, evidence its reader sees, shows a use; asked then, while not zero, and once a minute).
    :class:`~falcon_gpu.sources.nvml.slow.SlowReadings` keeps the answers in between."""

    kind: Literal["cycle", "setting", "follows", "gated"] = "cycle"
    after: str | None = None
    """``follows``: the reading (a table field) it follows; ``gated``: the evidence, in words."""


EVERY_CYCLE: Final = Refresh()
SETTING: Final = Refresh("setting")


class Nvml(msgspec.Struct, frozen=True, gc=False):
    """Where NVML has the reading, and in which unit it answers."""

    unit: Unit
    field_ids: tuple[int, ...] = ()
    """``NVML_FI_DEV_*`` IDs that carry it, preferred first (it rides in the one field-values call)."""
    call: str | None = None
    """The dedicated ``nvml*`` function (the fallback where the driver lacks the field ID)."""
    args: tuple[int, ...] = ()
    """Arguments of ``call`` after the handle (a sensor, a clock type)."""
    member: str | int | None = None
    """Where in ``call``'s answer: a struct attribute (``"gpu"``) or a list index; None: the answer."""
    value_type: int = ULL
    """The ``nvmlValueType_t`` a driver answers the field ID with (the simulator answers the same)."""
    refresh: Refresh = EVERY_CYCLE
    hook: bool = False
    """Read by its reader's own code (a fallback, a special value, a struct of several calls, a gate, a
    rate); False: by the generic table reader (:mod:`falcon_gpu.sources.nvml.readers.table`), which makes
    ``call`` as ``refresh`` says (one call for the rows that share it) or takes the field value, and
    converts it with ``from_nvml``: the reader has no line for it."""


class Simulated(msgspec.Struct, frozen=True, gc=False):
    """Where a scenario holds it (CONTRACT section 6; public: keys never change)."""

    key: str
    unit: Unit
    """The scenario's unit (the key's suffix says it: ``_percent``, ``_mhz``, ``_watts``)."""
    group: str | None = None
    """The scenario object under the GPU that holds ``key`` (``"pcie"``), which is also the name
    ``not_supported`` takes; None: a number of the GPU itself, named by its key."""

    @property
    def support_name(self) -> str:
        return self.group or self.key


class Publish(msgspec.Struct, frozen=True, gc=False):
    """How one schema publishes the reading."""

    name: str
    unit: Unit
    help: str = ""
    """Prometheus ``# HELP`` (Open-Falcon has none)."""
    kind: MetricKind = "gauge"
    digits: int | None = None
    """Round to this many decimals after converting (dcgm-exporter's percentages)."""
    own: bool = False
    """The schema renders the series itself (per GPU instance, a roll-up): it takes the name and the
    conversion from here, but the table-driven device loop leaves it out."""


class Reading(msgspec.Struct, frozen=True, dict=True):  # collected: its __dict__ holds closures
    """One scalar per-device reading, declared once.

    Its conversions are worked out on first use (``cached_property``, kept in the instance's
    ``__dict__``): equal, hashed and replaced by its declared fields, not by those conversions."""

    field: str
    """The :class:`~falcon_gpu.model.snapshot.DeviceReading` field (and ``Fields`` key)."""
    type: type[int] | type[float]
    unit: Unit
    """Its base unit in the snapshot."""
    reader: str
    """The reader (``readers.READERS`` name, the ``reader`` label) that produces it."""
    doc: str
    nvml: Nvml | None = None
    """None: derived by its reader from other answers (``derived`` says how)."""
    derived: str | None = None
    sim: Simulated | None = None
    """None: the simulator has no key of its own for it (NVML computes it, or ``derived``)."""
    falcon_gpu: Publish | None = None
    dcgm: Publish | None = None
    openfalcon: Publish | None = None
    nvidia_smi: Publish | None = None
    """None in a schema: not published in that schema."""

    @cached_property
    def from_nvml(self) -> Callable[[Any], Any]:
        """NVML's answer -> the base unit, as ``type`` (for its reader; where the units are one, the
        type itself, ``float(value)``: the same number without a call of ours around it)."""
        to_base, kind = converter(self.nvml.unit if self.nvml else self.unit, self.unit), self.type
        return kind if to_base is same else lambda value: kind(to_base(value))

    @cached_property
    def sim_to_nvml(self) -> Convert:
        """The scenario's unit -> NVML's (for the simulator's answer)."""
        return converter(self.sim.unit if self.sim else self.unit, self.nvml.unit if self.nvml else self.unit)

    @cached_property
    def sim_to_base(self) -> Convert:
        """The scenario's unit -> the base unit (for the tests' expected values)."""
        return converter(self.sim.unit if self.sim else self.unit, self.unit)

    def published(self, schema: SchemaName) -> Publish | None:
        out: Publish | None = getattr(self, schema)
        return out

    def to_schema(self, schema: SchemaName) -> Convert:
        """The base unit -> ``schema``'s unit (``same`` where they are one)."""
        publish = self.published(schema)
        if publish is None:
            raise ValueError(f"{self.field} is not published in the {schema} schema")
        return converter(self.unit, publish.unit, publish.digits)


def _nvml_unit(reading: Reading) -> Unit:
    if reading.nvml is None or reading.type is not float:
        raise ValueError(f"{reading.field}: not a float reading that NVML answers")
    return reading.nvml.unit


def divisor_from_nvml(reading: Reading) -> float:
    """The exact ``k`` for which ``reading.from_nvml(v)`` is ``v / k`` for NVML's numbers (ints and
    floats): a float reading whose NVML unit is a part of its base unit (mW -> W). Built at a reader's
    import; ValueError for any other reading, so a table change cannot slip a wrong constant in."""
    return divisor(_nvml_unit(reading), reading.unit)


def multiplier_from_nvml(reading: Reading) -> float:
    """The exact ``k`` for which ``reading.from_nvml(v)`` is ``v * k`` (MHz -> Hz; see
    :func:`divisor_from_nvml`)."""
    return multiplier(_nvml_unit(reading), reading.unit)


def is_same(convert: Convert) -> bool:
    """Whether ``convert`` changes nothing (a schema skips calling it)."""
    return convert is same
