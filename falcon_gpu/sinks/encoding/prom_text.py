"""Prometheus text exposition format 0.0.4, as a pure function of a batch.

Used by the stdout sink, the Pushgateway sink and the scrape endpoint. Label
values are escaped (backslash, double quote, newline) as the format requires. No
timestamps: Pushgateway rejects them, and a scrape or stdout reader takes the
time it reads.

The same series (metric name and label set) come back every cycle, and most of
their values do not change between cycles (memory total, limits, clocks, error
counters), so each series' rendered ``name{labels} value`` line is cached with its
value (:class:`SeriesText`): an unchanged value reuses the line, a changed one
formats only the value, and a label set is escaped once in its life. The
``# HELP``/``# TYPE`` header of a family is rendered once too. A family whose
series did not change at all comes from the schema as the very same ``Family``
object as last time (:class:`~falcon_gpu.schemas.builder.FamilyMemo`), so each
family's whole text is kept with the family it was made from and reused on an
identity check. So the per-cycle work is one look-up per family, plus one look-up
and one comparison per series of a family that changed, plus formatting for what
changed. The caches are bounded by what the owner encodes, with no size limit: every
:data:`SWEEP_EVERY` encodes the cache keeps only the families, headers and series lines of the batch
it has just encoded, so a node whose pods churn cannot grow it without bound.

A :class:`SeriesText` belongs to the one thing that encodes with it (a Pushgateway sink, the stdout
sink, ``listen``), which encodes on one thread: none is shared by the process.
"""

from __future__ import annotations

import math
from typing import Final

from falcon_gpu.model.samples import Family, Labels, PromBatch, Series
from falcon_gpu.model.text import utf8_text

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SWEEP_EVERY: Final = 16
"""Encodes between two sweeps of a :class:`SeriesText` (a series gone for 16 cycles goes from it)."""


def escape_label_value(value: str) -> str:
    """Backslash, double quote and newline escaped; a lone surrogate (which UTF-8 cannot carry, so the
    body could not be sent at all) replaced by U+FFFD, see :mod:`falcon_gpu.model.text`."""
    return utf8_text(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if -1e15 < value < 1e15:  # the usual case first (false for NaN and the infinities)
        whole = int(value)
        return str(whole) if whole == value else repr(float(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def series_prefix(name: str, labels: Labels) -> str:
    """``name{k="v",...} `` (with the space before the value), label values escaped."""
    if not labels:
        return name + " "
    inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels)
    return f"{name}{{{inner}}} "


class SeriesText:
    """Rendered text kept across cycles: per metric name, label set -> (last value, its line);
    per family its header; and per metric name the last family seen and its whole text. Swept
    every :data:`SWEEP_EVERY` encodes (:meth:`texts`): what that encode's batch does not have goes."""

    __slots__ = ("_encodes", "_families", "_headers", "_lines", "_size")

    def __init__(self) -> None:
        self._encodes = 0
        self._lines: dict[str, dict[Labels, tuple[float, str]]] = {}
        self._headers: dict[tuple[str, str, str], str] = {}
        self._families: dict[str, tuple[Family, str, list[str], list[int]]] = {}
        """Metric name -> (its last family, that family's text, its lines, where each line's value
        begins: a changed value is the line up to there and the value formatted). Lengths, not the
        prefixes themselves: a copy of nearly every line (2.9 MiB of 2,000 pods' text) for one slice
        per changed value."""
        self._size = 0

    def __len__(self) -> int:
        """Series lines held (for tests and memory checks)."""
        return self._size

    def line(self, name: str, labels: Labels) -> tuple[float, str] | None:
        """The cached (value, line) of a series, if any (for tests)."""
        return self._lines.get(name, {}).get(labels)

    def header(self, family: Family) -> str:
        key = (family.name, family.kind, family.help)
        text = self._headers.get(key)
        if text is None:
            name = family.name
            text = self._headers[key] = (
                f"# HELP {name} {_escape_help(family.help)}\n# TYPE {name} {family.kind}"
            )
        return text

    def text(self, family: Family) -> str:
        """The family's header and lines, ``\n`` between them and no newline at the end.

        The last family seen under its name is kept with its text and lines: the very same object
        (the schema hands out an unchanged family again) is its text; a family with the same label
        sets in the same order (the usual cycle: only values moved) is walked beside it, keeping
        each unchanged line and formatting only changed values, with no look-up per series;
        anything else goes through the per-series cache (:meth:`lines`)."""
        name = family.name
        last = self._families.get(name)
        if last is not None and last[0] is family:
            return last[1]
        lines = None
        if last is not None:
            cuts = last[3]  # the same label sets (if _follow gives lines): the same prefixes
            lines = _follow(last[0].series, last[2], cuts, family.series)
        if lines is None:
            lines = []
            self._series_lines(family, lines)
            cuts = [line.rindex(" ") + 1 for line in lines]
        text = self.header(family) + "\n" + "\n".join(lines)
        self._families[name] = (family, text, lines, cuts)
        return text

    def texts(self, families: tuple[Family, ...]) -> list[str]:
        """:meth:`text` of each family that has series, the usual case (the very family object of
        last cycle: its kept text) looked up here, with no call per family."""
        kept = self._families
        text = self.text
        out: list[str] = []
        append = out.append
        for family in families:
            if family.series:
                last = kept.get(family.name)
                append(last[1] if last is not None and last[0] is family else text(family))
        self._encodes += 1
        if self._encodes % SWEEP_EVERY == 0:
            self._keep_only(families)
        return out

    def _keep_only(self, families: tuple[Family, ...]) -> None:
        """Keep the text of ``families`` (the batch just encoded) only: a family, a header or a
        series line that this batch does not have goes (bounded by the series the owner encodes).

        Every series of the batch has its line here (a new label set always goes through
        :meth:`_series_lines`), so more lines than series means some went; none more, nothing to
        drop and nothing rebuilt (the usual sweep: a check per family)."""
        names = {f.name for f in families if f.series}
        if len(self._families) > len(names):
            self._families = {name: kept for name, kept in self._families.items() if name in names}
        if len(self._headers) > len(names):
            self._headers = {key: text for key, text in self._headers.items() if key[0] in names}
        if self._size <= sum(len(f.series) for f in families):
            return
        lines: dict[str, dict[Labels, tuple[float, str]]] = {}
        for family in families:
            old = self._lines.get(family.name)
            if old:
                lines[family.name] = {
                    s.labels: hit for s in family.series if (hit := old.get(s.labels)) is not None
                }
        self._lines = lines
        self._size = sum(map(len, lines.values()))

    def lines(self, family: Family, out: list[str]) -> None:
        """Append the family's header and one line per series to ``out``."""
        out.append(self.header(family))
        self._series_lines(family, out)

    def _series_lines(self, family: Family, out: list[str]) -> None:
        name = family.name
        cache = self._lines.get(name)
        if cache is None:
            cache = self._lines[name] = {}
        append = out.append
        for series in family.series:
            labels, value = series.labels, series.value
            hit = cache.get(labels)
            if hit is not None and hit[0] == value:
                append(hit[1])
            else:
                append(self._render(cache, name, labels, value, hit))

    def _render(
        self,
        cache: dict[Labels, tuple[float, str]],
        name: str,
        labels: Labels,
        value: float,
        hit: tuple[float, str] | None,
    ) -> str:
        """A changed value (format the value only) or a new series (escape its labels once)."""
        if hit is not None:
            line = hit[1][: hit[1].rindex(" ") + 1] + format_value(value)
        else:
            self._size += 1
            line = series_prefix(name, labels) + format_value(value)
        cache[labels] = (value, line)
        return line


def _follow(
    before: tuple[Series, ...], lines: list[str], cuts: list[int], series: tuple[Series, ...]
) -> list[str] | None:
    """The lines of ``series`` from ``before``'s ``lines``, if both have the same label sets in the same
    order (None otherwise): an equal value keeps its line, a changed one is its prefix (the line up to
    the value) and its value formatted. A kept line always belongs to the value kept with it, so NaN
    (never equal) is written anew."""
    if len(series) != len(before):
        return None
    out: list[str] = []
    append = out.append
    for now, then, line, cut in zip(series, before, lines, cuts):  # noqa: B905 (hot; lengths checked)
        labels = now.labels
        if labels is not then.labels and labels != then.labels:
            return None
        value = now.value
        append(line if value == then.value else line[:cut] + format_value(value))
    return out


def encode(batch: PromBatch, cache: SeriesText | None = None) -> str:
    """The whole batch; families with no series are left out (the format allows it, but it is noise).
    ``cache``: the caller's, kept across its cycles (None: a fresh one, nothing reused)."""
    out = (cache if cache is not None else SeriesText()).texts(batch.families)
    if not out:
        return ""
    out.append("")
    return "\n".join(out)
