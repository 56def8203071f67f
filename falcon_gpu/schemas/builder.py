"""Collects series into families in a fixed metric order, from a table of specs.

Per cycle the work is proportional to what changed: series are appended to two plain lists per
metric (labels, values; no hashing of label tuples), and a metric whose labels and values are the
same as in the schema's previous cycle (:class:`FamilyMemo`) hands out the previous cycle's
:class:`~falcon_gpu.model.samples.Family` object itself, so no ``Series`` is built for it and the
Prometheus encoder reuses that family's text whole (:mod:`falcon_gpu.sinks.encoding.prom_text`).
"""

from __future__ import annotations

from typing import NamedTuple

from falcon_gpu.model.samples import Family, Labels, MetricKind, Series


class MetricSpec(NamedTuple):
    name: str
    kind: MetricKind
    help: str


def without_empty(labels: Labels) -> Labels:
    """``labels`` minus the pairs whose value is empty (the same tuple when there are none)."""
    if all(value for _, value in labels):
        return labels
    return tuple(pair for pair in labels if pair[1])


Columns = tuple[list[Labels], list[float]]
"""One metric's series of one cycle so far: their labels and their values, in the order added."""


class FamilyMemo:
    """One schema's families of its previous cycle, per metric name: (labels, values, family).

    Bounded by the schema's metric names. Shared by whichever thread renders (sinks may render in
    threads of their own): an entry is an immutable tuple replaced whole, its lists never written
    after it is stored, so a render that reads an entry another one just replaced still compares
    that entry's own labels and values with its own.
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[str, tuple[list[Labels], list[float], Family]] = {}

    def __len__(self) -> int:
        return len(self._last)

    def get(self, name: str) -> tuple[list[Labels], list[float], Family] | None:
        return self._last.get(name)

    def store(self, name: str, labels: list[Labels], values: list[float], family: Family) -> None:
        self._last[name] = (labels, values, family)


class FamilyBuilder:
    """Series added under a spec's name come out grouped, in the specs' order.

    Duplicate label sets within one metric are a bug upstream; Prometheus would
    reject the whole remote-write request, so the last value wins here instead
    (in the place of the first, as a dictionary keeps them).

    A label whose value is ``""`` is left out of the series (CONTRACT section 3):
    Prometheus treats an empty label as absent, so keeping it would only make
    stores and validators disagree about what the series is; a series is never
    dropped for it. Doing it here, where every Prometheus schema builds its
    series, is what makes it hold for every schema and every sink.

    ``memo``: the schema's previous families (:class:`FamilyMemo`); a metric whose series are equal
    to its previous ones (the same labels, in the same order, and equal values) is that previous
    :class:`Family` object. None: every family is built anew (a schema rendered per group).
    """

    __slots__ = ("_columns", "_labels", "_last_in", "_last_out", "_memo", "_specs", "_values")

    def __init__(self, specs: tuple[MetricSpec, ...], memo: FamilyMemo | None = None) -> None:
        self._specs = specs
        self._memo = memo
        self._labels: dict[str, list[Labels]] = {s.name: [] for s in specs}
        self._values: dict[str, list[float]] = {s.name: [] for s in specs}
        # schemas add many metrics with the same label tuple in a row: filter it once
        self._last_in: Labels | None = None
        self._last_out: Labels = ()
        self._columns: dict[int, tuple[tuple[list[Labels], ...], tuple[list[float], ...]]] = {}

    def add(self, name: str, labels: Labels, value: float | int | bool | None) -> None:
        """Add one series; ``None`` (a reading that is absent) adds nothing."""
        if value is None:
            return
        if labels is not self._last_in:
            self._last_in = labels
            self._last_out = without_empty(labels)
        self._labels[name].append(self._last_out)
        self._values[name].append(float(value))

    def put(self, name: str, labels: Labels, value: float | int | bool | None) -> None:
        """:meth:`add` for ``labels`` that have no empty value already (a schema's label tuples
        kept per identity, :mod:`falcon_gpu.schemas.label_cache`): nothing to filter."""
        if value is not None:
            self._labels[name].append(labels)
            self._values[name].append(float(value))

    def column(self, name: str) -> Columns:
        """One metric's (labels, values) lists, for a caller that appends to them directly: labels
        with no empty value (as :meth:`put`) and values already ``float``, one of each per series."""
        return self._labels[name], self._values[name]

    def columns_of(self, names: tuple[str, ...]) -> tuple[tuple[list[Labels], ...], tuple[list[float], ...]]:
        """The label and the value lists of each of ``names`` (looked up once per builder), to append
        to as :meth:`column`'s; ``names`` must stay the same tuple object."""
        return self._columns.get(id(names)) or self._columns_of(names)

    def _columns_of(self, names: tuple[str, ...]) -> tuple[tuple[list[Labels], ...], tuple[list[float], ...]]:
        found = self._columns[id(names)] = (
            tuple(self._labels[name] for name in names),
            tuple(self._values[name] for name in names),
        )
        return found

    def families(self) -> tuple[Family, ...]:
        out: list[Family] = []
        memo = self._memo
        for spec in self._specs:
            name = spec.name
            labels = self._labels[name]
            if not labels:
                continue
            values = self._values[name]
            last = memo.get(name) if memo is not None else None
            if last is not None and labels == last[0]:  # identical label tuples compare at once
                if values == last[1]:
                    out.append(last[2])
                    continue
                series = tuple(map(Series, labels, values))  # those labels had no duplicate
            else:
                unique = dict(zip(labels, values, strict=True))
                if len(unique) != len(labels):  # stored deduplicated: never equal to the raw lists
                    labels, values = list(unique), list(unique.values())
                series = tuple(map(Series, labels, values))
            family = Family(name, spec.kind, spec.help, series)
            if memo is not None:
                memo.store(name, labels, values, family)
            out.append(family)
        return tuple(out)
