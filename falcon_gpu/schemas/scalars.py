"""A schema's scalar device series, rendered from the reading table (:mod:`falcon_gpu.readings`).

Everything a schema needs per reading (series name, help, type, conversion from the base unit)
is looked up once, at import; per device and cycle what is left is one ``attrgetter`` call for
all the readings and one conversion per present value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from operator import attrgetter
from typing import Any

from falcon_gpu.model.samples import Labels, MetricKind
from falcon_gpu.readings.spec import Reading, SchemaName, is_same
from falcon_gpu.readings.units import Convert
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec, RowBlock


class ScalarSeries:
    """The readings of ``readings`` that ``schema`` publishes, in table order."""

    __slots__ = (
        "_block",
        "_block_fields",
        "_converts",
        "_fields",
        "_get",
        "_names",
        "_rendered",
        "names",
        "specs",
    )

    def __init__(self, readings: tuple[Reading, ...], schema: SchemaName) -> None:
        published = [(r, p) for r in readings if (p := r.published(schema)) is not None]
        self.specs = tuple(MetricSpec(p.name, p.kind, p.help) for _, p in published)
        self._fields = tuple(r.field for r, _ in published)
        """Every published reading's family, also those the schema renders itself (``Publish.own``)."""
        self.names = {r.field: p.name for r, p in published}
        """Snapshot field -> series name, for the schema's own series of a reading."""
        rendered = [(r, p) for r, p in published if not p.own]
        fields = tuple(r.field for r, _ in rendered)
        get = attrgetter(*fields)
        self._get: Callable[[Any], tuple[Any, ...]] = get if len(fields) > 1 else lambda obj: (get(obj),)
        self._rendered = fields
        self._block_fields = frozenset(fields)
        self._names = tuple(p.name for _, p in rendered)
        self._converts: tuple[Convert, ...] = tuple(
            float if is_same(convert := r.to_schema(schema)) else convert for r, p in rendered
        )
        """Base unit -> the schema's, as a float (``float`` itself where the units are one)."""
        self._block = RowBlock(tuple(MetricSpec(p.name, p.kind, p.help) for _, p in rendered), self._converts)

    def specs_of(
        self, kind: MetricKind | None = None, readings: tuple[Reading, ...] | None = None
    ) -> tuple[MetricSpec, ...]:
        """The families of one type and/or of some of the readings (a schema that lists its gauges
        before its counters, or places the interconnect after its structured series); table order."""
        chosen = None if readings is None else {r.field for r in readings}
        return tuple(
            spec
            for spec, field in zip(self.specs, self._fields, strict=True)
            if (kind is None or spec.kind == kind) and (chosen is None or field in chosen)
        )

    def add_to(self, b: FamilyBuilder, labels: Labels, reading: Any) -> None:
        """Add the series of each reading that ``reading`` (a
        :class:`~falcon_gpu.model.snapshot.DeviceReading`) has, under ``labels`` (with no empty value:
        a schema's label tuples kept per identity, as :meth:`FamilyBuilder.put` takes them); absent
        readings add none. One row of the builder's block (:class:`~falcon_gpu.schemas.builder.RowBlock`):
        the conversions run when the families are built, and only for a reading that changed."""
        b.rows(self._block).append((labels, self._get(reading)))

    def add_fields(self, b: FamilyBuilder, labels: Labels, **values: float | int | None) -> None:
        """Add a row of a few of the readings only (by snapshot field; the others absent): a MIG
        instance's memory, whose series go with its GPU's, in the order they are added."""
        unknown = values.keys() - self._block_fields
        if unknown:
            raise ValueError(f"not rendered from the table: {sorted(unknown)}")
        b.rows(self._block).append((labels, tuple(values.get(field) for field in self._rendered)))

    def rows(self, reading: Any) -> Iterator[tuple[str, Convert, Any]]:
        """(series name, base unit -> the schema's, value or None) per rendered reading of ``reading``,
        for a schema whose output is not Prometheus families (Open-Falcon items); no list is built."""
        return zip(self._names, self._converts, self._get(reading))  # noqa: B905 (hot path)
