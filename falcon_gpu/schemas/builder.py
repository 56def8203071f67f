"""Collects series into families in a fixed metric order, from a table of specs."""

from __future__ import annotations

from dataclasses import dataclass

from falcon_gpu.model.samples import Family, Labels, MetricKind, Series


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    kind: MetricKind
    help: str


def without_empty(labels: Labels) -> Labels:
    """``labels`` minus the pairs whose value is empty (the same tuple when there are none)."""
    if all(value for _, value in labels):
        return labels
    return tuple(pair for pair in labels if pair[1])


class FamilyBuilder:
    """Series added under a spec's name come out grouped, in the specs' order.

    Duplicate label sets within one metric are a bug upstream; Prometheus would
    reject the whole remote-write request, so the last value wins here instead.

    A label whose value is ``""`` is left out of the series (CONTRACT section 3):
    Prometheus treats an empty label as absent, so keeping it would only make
    stores and validators disagree about what the series is; a series is never
    dropped for it. Doing it here, where every Prometheus schema builds its
    series, is what makes it hold for every schema and every sink.
    """

    def __init__(self, specs: tuple[MetricSpec, ...]) -> None:
        self._specs = specs
        self._series: dict[str, dict[Labels, float]] = {s.name: {} for s in specs}
        # schemas add many metrics with the same label tuple in a row: filter it once
        self._last_in: Labels | None = None
        self._last_out: Labels = ()
        self._columns: dict[int, tuple[dict[Labels, float], ...]] = {}

    def add(self, name: str, labels: Labels, value: float | int | bool | None) -> None:
        """Add one series; ``None`` (a reading that is absent) adds nothing."""
        if value is None:
            return
        if labels is not self._last_in:
            self._last_in = labels
            self._last_out = without_empty(labels)
        self._series[name][self._last_out] = float(value)

    def put(self, name: str, labels: Labels, value: float | int | bool | None) -> None:
        """:meth:`add` for ``labels`` that have no empty value already (a schema's label tuples
        kept per identity, :mod:`falcon_gpu.schemas.label_cache`): nothing to filter."""
        if value is not None:
            self._series[name][labels] = float(value)

    def columns(
        self, names: tuple[str, ...], labels: Labels
    ) -> tuple[tuple[dict[Labels, float], ...], Labels]:
        """The series of each of ``names`` (looked up once per builder), and ``labels`` as stored
        (empty values left out): for a caller that adds many metrics of one label set in a tight loop
        (:mod:`falcon_gpu.schemas.scalars`); ``names`` must stay the same tuple object."""
        if labels is not self._last_in:
            self._last_in = labels
            self._last_out = without_empty(labels)
        return self.columns_of(names), self._last_out

    def columns_of(self, names: tuple[str, ...]) -> tuple[dict[Labels, float], ...]:
        """The series of each of ``names``, to store under labels with no empty value (as :meth:`put`);
        ``names`` must stay the same tuple object."""
        found = self._columns.get(id(names))
        if found is None:
            found = self._columns[id(names)] = tuple(self._series[name] for name in names)
        return found

    def families(self) -> tuple[Family, ...]:
        return tuple(
            Family(s.name, s.kind, s.help, tuple(map(Series, series.keys(), series.values())))
            for s in self._specs
            if (series := self._series[s.name])
        )
