"""A schema's scalar device series, rendered from the reading table (:mod:`falcon_gpu.readings`).

Everything a schema needs per reading (series name, help, type, conversion from the base unit)
is looked up once, at import; per device and cycle what is left is one ``attrgetter`` call for
all the readings and one conversion per present value.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from falcon_gpu.model.samples import MetricKind
from falcon_gpu.readings.spec import Reading, SchemaName, is_same
from falcon_gpu.readings.units import Convert
from falcon_gpu.schemas.builder import MetricSpec


class ScalarSeries:
    """The readings of ``readings`` that ``schema`` publishes, in table order."""

    __slots__ = ("_get", "_out", "names", "specs")

    def __init__(self, readings: tuple[Reading, ...], schema: SchemaName) -> None:
        published = [(r, p) for r in readings if (p := r.published(schema)) is not None]
        self.specs = tuple(MetricSpec(p.name, p.kind, p.help) for _, p in published)
        """Every published reading's family, also those the schema renders itself (``Publish.own``)."""
        self.names = {r.field: p.name for r, p in published}
        """Snapshot field -> series name, for the schema's own series of a reading."""
        rendered = [(r, p) for r, p in published if not p.own]
        fields = tuple(r.field for r, _ in rendered)
        get = attrgetter(*fields)
        self._get: Callable[[Any], tuple[Any, ...]] = get if len(fields) > 1 else lambda obj: (get(obj),)
        self._out: tuple[tuple[str, Convert | None], ...] = tuple(
            (p.name, None if is_same(convert := r.to_schema(schema)) else convert) for r, p in rendered
        )

    def specs_of(self, kind: MetricKind) -> tuple[MetricSpec, ...]:
        """The families of one type (a schema that lists its gauges before its counters)."""
        return tuple(spec for spec in self.specs if spec.kind == kind)

    def values(self, reading: Any) -> list[tuple[str, float]]:
        """(series name, value in the schema's unit) of each reading that ``reading`` (a
        :class:`~falcon_gpu.model.snapshot.DeviceReading`) has; absent ones are left out."""
        return [
            (name, value if convert is None else convert(value))
            for (name, convert), value in zip(self._out, self._get(reading), strict=True)
            if value is not None
        ]
