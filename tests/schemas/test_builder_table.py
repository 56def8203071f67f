"""The builder's table index (schemas/builder.py ``index_specs``, kept by a ``FamilyMemo``): the
families still come out in the table's order whichever order they were added in, an equal table
that is another tuple gets the same families, and a table that lists a metric twice is refused."""

from __future__ import annotations

import pytest

from falcon_gpu.schemas.builder import FamilyBuilder, FamilyMemo, MetricSpec

SPECS = (
    MetricSpec("a", "gauge", "A."),
    MetricSpec("b", "gauge", "B."),
    MetricSpec("c_total", "counter", "C."),
)


def names_and_values(specs: tuple[MetricSpec, ...]) -> list[tuple[str, list[float]]]:
    b = FamilyBuilder(specs)
    b.put("c_total", (("gpu", "0"),), 3)
    b.column("b")  # asked for its lists, given no series: no family
    b.put("a", (("gpu", "0"),), 1)
    b.add("a", (("gpu", "1"), ("pod", "")), 2)
    return [(f.name, [s.value for s in f.series]) for f in b.families()]


def test_families_follow_the_table_and_an_equal_table_gives_the_same() -> None:
    expected = [("a", [1.0, 2.0]), ("c_total", [3.0])]
    assert names_and_values(SPECS) == expected
    assert names_and_values(SPECS) == expected, "the second builder of the same table"
    assert names_and_values(SPECS[:1] + SPECS[1:]) == expected, "an equal table, another tuple"
    assert names_and_values((SPECS[2], SPECS[0], SPECS[1])) == [("c_total", [3.0]), ("a", [1.0, 2.0])]


def test_a_metric_listed_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="listed twice"):
        FamilyBuilder((*SPECS, MetricSpec("a", "gauge", "again")))


def test_a_memo_handed_another_table_starts_again() -> None:
    memo = FamilyMemo()
    b = FamilyBuilder(SPECS, memo)
    b.put("a", (("gpu", "0"),), 1)
    (first,) = b.families()
    again = FamilyBuilder(SPECS, memo)
    again.put("a", (("gpu", "0"),), 1)
    assert again.families() == (first,) and again.families()[0] is first, "the same table: kept"
    other = (MetricSpec("a", "gauge", "Another help."),)
    b = FamilyBuilder(other, memo)
    b.put("a", (("gpu", "0"),), 1)
    (fam,) = b.families()
    assert fam.help == "Another help." and len(memo) == 1, "another table: its own families only"
