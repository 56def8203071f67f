"""Collects series into families in a fixed metric order, from a table of specs.

Per cycle the work is proportional to what changed: series are appended to two plain lists per
metric (labels, values; no hashing of label tuples), and a metric whose labels and values are the
same as in the schema's previous cycle (:class:`FamilyMemo`) hands out the previous cycle's
:class:`~falcon_gpu.model.samples.Family` object itself, so no ``Series`` is built for it and the
Prometheus encoder reuses that family's text whole (:mod:`falcon_gpu.sinks.encoding.prom_text`).

Metrics that every GPU has one series of under one label set (the reading table's scalars, GPM) are
added a row at a time instead (:class:`RowBlock`: one label set and the raw values of all the
block's metrics), and turned into families column by column at the end: a column whose labels and
raw values are those of the previous cycle is the previous family, with no per-series work at all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

import msgspec

from falcon_gpu.model.samples import Family, Labels, MetricKind, Series


class MetricSpec(msgspec.Struct, frozen=True, gc=False):
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
Row = tuple[Labels, tuple[Any, ...]]
"""One label set and a :class:`RowBlock`'s raw values under it (None: that reading is absent)."""
_LABELS_OF, _VALUES_OF = itemgetter(0), itemgetter(1)


class RowBlock:
    """Metrics added together, one row per label set (a GPU, a MIG instance): ``specs`` and, per
    metric, the conversion of its raw value to the float published. A block's metrics get their
    series from its rows only (:meth:`FamilyBuilder.rows`), never from ``put``/``add``."""

    __slots__ = ("converts", "specs")

    def __init__(self, specs: tuple[MetricSpec, ...], converts: tuple[Callable[[Any], float], ...]) -> None:
        if len(specs) != len(converts):
            raise ValueError("a RowBlock needs one conversion per metric")
        self.specs = specs
        self.converts = converts


MemoEntry = tuple[Sequence[Labels], Sequence[Any], Family | None]
"""(labels, values, family) of a ``put``/``add`` metric (lists, a family always); (each row's labels,
the column of raw values, the family or None if no row had a value) of a block's metric."""


class FamilyMemo(dict[str, MemoEntry]):
    """One renderer's families of its previous cycle in one schema: metric name -> :data:`MemoEntry`,
    and the index of the schema's table of specs (names in order, name -> spec), built on first use.

    Owned by whoever renders (:class:`~falcon_gpu.schemas.render.SchemaRenderer`, one per agent and
    schema), never shared between owners, and used by one render at a time (the owner's lock).
    Bounded by the schema's metric names. An entry is an immutable tuple replaced whole, its lists
    never written after it is stored. (A dict itself: its ``get`` and item assignment are the C
    ones, two per metric and cycle.)
    """

    __slots__ = ("_table",)

    def __init__(self) -> None:
        super().__init__()
        self._table: tuple[tuple[MetricSpec, ...], tuple[str, ...], dict[str, MetricSpec]] | None = None

    def table(self, specs: tuple[MetricSpec, ...]) -> tuple[tuple[str, ...], dict[str, MetricSpec]]:
        """``specs``' names and name -> spec, indexed once for this memo's life; another table (a
        memo handed to a second schema) starts the memo again, as its families are not this one's."""
        table = self._table
        if table is None or table[0] is not specs:
            self.clear()
            table = self._table = (specs, *index_specs(specs))
        return table[1], table[2]


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

    ``memo``: the renderer's previous families in this schema (:class:`FamilyMemo`); a metric whose
    series are equal to its previous ones (the same labels, in the same order, and equal values) is
    that previous :class:`Family` object. None: every family is built anew (a schema rendered per group).

    ``chosen``: the families the ``[metrics]`` table keeps (:mod:`falcon_gpu.schemas.selection`;
    None: all). Any other family's series are dropped before a ``Series`` or a conversion is made
    for them (one test per family and cycle, not per series); :meth:`wants` lets a schema skip
    gathering a whole group of them.
    """

    __slots__ = (
        "_by_name",
        "_chosen",
        "_columns",
        "_labels",
        "_last_in",
        "_last_out",
        "_memo",
        "_names",
        "_rows",
        "_values",
    )

    def __init__(
        self,
        specs: tuple[MetricSpec, ...],
        memo: FamilyMemo | None = None,
        chosen: frozenset[str] | None = None,
    ) -> None:
        self._memo = memo
        self._chosen = chosen
        self._names, self._by_name = memo.table(specs) if memo is not None else index_specs(specs)
        # lists only for the metrics that get series this cycle: a schema has some eighty metrics,
        # most of them with no ``put``/``add`` series in a given cycle (block metrics, MIG, pods)
        self._labels: defaultdict[str, list[Labels]] = defaultdict(list)
        self._values: defaultdict[str, list[float]] = defaultdict(list)
        # schemas add many metrics with the same label tuple in a row: filter it once
        self._last_in: Labels | None = None
        self._last_out: Labels = ()
        self._columns: dict[tuple[str, ...], tuple[tuple[list[Labels], ...], tuple[list[float], ...]]] = {}
        self._rows: dict[RowBlock, tuple[RowBlock, list[Row]]] = {}

    def wants(self, name: str) -> bool:
        """Whether the family ``name`` is emitted at all (the ``[metrics]`` table)."""
        return self._chosen is None or name in self._chosen

    def rows(self, block: RowBlock) -> list[Row]:
        """The block's rows of this cycle, to append ``(labels, raw values)`` to: labels with no empty
        value (as :meth:`put`), one raw value (or None) per metric of the block, in its order."""
        found = self._rows.get(block)
        if found is None:
            found = self._rows[block] = (block, [])
        return found[1]

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
        to as :meth:`column`'s."""
        return self._columns.get(names) or self._columns_of(names)

    def _columns_of(self, names: tuple[str, ...]) -> tuple[tuple[list[Labels], ...], tuple[list[float], ...]]:
        found = self._columns[names] = (
            tuple(self._labels[name] for name in names),
            tuple(self._values[name] for name in names),
        )
        return found

    def families(self) -> tuple[Family, ...]:
        """Every metric's family of this cycle, in the specs' order; metrics with no series left out.

        Only the metrics that have series cost a step here (those given lists this cycle), and the
        families are put in the specs' order by one ``map`` over the names, in C: most of a schema's
        metrics have no series in a given cycle (no MIG, no pods, no policies)."""
        memo: dict[str, MemoEntry] = self._memo if self._memo is not None else {}
        found = self._row_families(memo)
        by_name, chosen = self._by_name, self._chosen
        for name, labels in self._labels.items():
            if not labels:  # asked for its lists (``column``), given no series
                continue
            if chosen is not None and name not in chosen:
                continue
            if name in found:
                raise ValueError(f"{name}: a block's metric must not be put or added as well")
            spec = by_name[name]
            values = self._values[name]
            last = memo.get(name)
            if last is not None and labels == last[0]:  # identical label tuples compare at once
                if values == last[1] and last[2] is not None:
                    found[name] = last[2]
                    continue
                family = Family(name, spec.kind, spec.help, tuple(map(Series, labels, values)))
            else:
                family, labels, values = _family(spec, labels, values)
            memo[name] = (labels, values, family)
            found[name] = family
        return tuple(filter(None, map(found.get, self._names)))

    def _row_families(self, memo: dict[str, MemoEntry]) -> dict[str, Family | None]:
        """Each block metric's family (None: no row had its reading), column by column: a column
        whose rows' labels and raw values equal the previous cycle's is the previous family."""
        found: dict[str, Family | None] = {}
        chosen = self._chosen
        for block, rows in self._rows.values():
            if not rows:
                continue
            row_labels = tuple(map(_LABELS_OF, rows))
            columns = zip(*map(_VALUES_OF, rows), strict=True)
            for spec, convert, column in zip(block.specs, block.converts, columns, strict=True):
                name = spec.name
                if chosen is not None and name not in chosen:
                    continue
                last = memo.get(name)
                unique = False  # the rows' label sets are known to be distinct
                if last is not None and last[0] == row_labels:
                    if last[1] == column:
                        found[name] = last[2]
                        continue
                    unique = last[2] is not None and len(last[2].series) == len(row_labels)
                if None in column:
                    labels = [lb for lb, value in zip(row_labels, column) if value is not None]  # noqa: B905
                    values = [convert(value) for value in column if value is not None]
                else:  # every row has the reading (the usual column): no per-row test
                    labels = list(row_labels)
                    values = list(map(convert, column))
                family = None
                if labels:
                    if unique:  # every row had a series last time, none was dropped: no duplicate
                        family = Family(name, spec.kind, spec.help, tuple(map(Series, labels, values)))
                    else:
                        family = _family(spec, labels, values)[0]
                found[name] = family
                memo[name] = (row_labels, column, family)
        return found


def index_specs(specs: tuple[MetricSpec, ...]) -> tuple[tuple[str, ...], dict[str, MetricSpec]]:
    """(the names in order, name -> spec); ValueError if a name is listed twice."""
    by_name = {spec.name: spec for spec in specs}
    if len(by_name) != len(specs):
        raise ValueError("a metric is listed twice in the table")
    return tuple(by_name), by_name


def _family(
    spec: MetricSpec, labels: list[Labels], values: list[float]
) -> tuple[Family, list[Labels], list[float]]:
    """A family of these series, duplicates dropped (the last value in the first place), and its
    labels and values as kept (deduplicated lists are never equal to the raw ones they came from)."""
    unique = dict(zip(labels, values, strict=True))
    if len(unique) != len(labels):
        labels, values = list(unique), list(unique.values())
    return Family(spec.name, spec.kind, spec.help, tuple(map(Series, labels, values))), labels, values
