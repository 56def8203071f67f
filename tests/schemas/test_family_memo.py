"""Families handed out again when nothing changed (schemas/builder.py ``FamilyMemo``) and their text
kept per family (sinks/encoding/prom_text.py ``SeriesText.text``): a change gives new text, a series
or a GPU that goes is gone, both stay bounded, and a run of cycles through the shared caches writes
exactly what fresh caches write for each cycle."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import msgspec
import pytest

from falcon_gpu.model.cycle import CycleData, HealthReport
from falcon_gpu.model.samples import Family, Labels, PromBatch, Series
from falcon_gpu.schemas import dcgm, falcon_gpu, falcon_gpu_device
from falcon_gpu.schemas.builder import FamilyBuilder, FamilyMemo, MetricSpec, RowBlock
from falcon_gpu.sinks.encoding import prom_text
from tests.schemas.fixtures import cycle

T = TypeVar("T")
SPECS = (MetricSpec("a", "gauge", "A."), MetricSpec("b_total", "counter", "B."))
GPU0 = (("gpu", "0"),)
GPU1 = (("gpu", "1"),)
Row = tuple[str, Labels, float]


def replaced(value: T, **changes: Any) -> T:
    """A changed copy of a model value (every one is a ``msgspec.Struct``)."""
    return msgspec.structs.replace(value, **changes)  # type: ignore[type-var]


def built(
    memo: FamilyMemo | None, *rows: tuple[str, tuple[tuple[str, str], ...], float]
) -> tuple[Family, ...]:
    b = FamilyBuilder(SPECS, memo)
    for name, labels, value in rows:
        b.put(name, labels, value)
    return b.families()


def series_of(families: tuple[Family, ...], name: str) -> list[tuple[Labels, float]]:
    return [(s.labels, s.value) for f in families if f.name == name for s in f.series]


def test_an_unchanged_family_is_the_same_object_and_a_changed_one_is_new() -> None:
    memo = FamilyMemo()
    one = built(memo, ("a", GPU0, 1), ("a", GPU1, 2), ("b_total", GPU0, 5))
    two = built(memo, ("a", (("gpu", "0"),), 1), ("a", GPU1, 2), ("b_total", GPU0, 6))
    assert two[0] is one[0], "equal labels (even in new tuples) and values: the same family"
    assert two[1] is not one[1] and series_of(two, "b_total") == [(GPU0, 6.0)]
    three = built(memo, ("a", GPU0, 1), ("a", GPU1, 3), ("b_total", GPU0, 6))
    assert three[1] is two[1]
    assert series_of(three, "a") == [(GPU0, 1.0), (GPU1, 3.0)]
    assert len(memo) == 2, "one entry per metric name"


def test_a_series_or_a_family_that_goes_is_gone() -> None:
    memo = FamilyMemo()
    built(memo, ("a", GPU0, 1), ("a", GPU1, 2), ("b_total", GPU0, 5))
    fewer = built(memo, ("a", GPU0, 1))
    assert series_of(fewer, "a") == [(GPU0, 1.0)]
    assert [f.name for f in fewer] == ["a"], "a metric with no series this cycle is left out"
    back = built(memo, ("a", GPU0, 1), ("a", GPU1, 2))
    assert series_of(back, "a") == [(GPU0, 1.0), (GPU1, 2.0)]
    reordered = built(memo, ("a", GPU1, 2), ("a", GPU0, 1))
    assert series_of(reordered, "a") == [(GPU1, 2.0), (GPU0, 1.0)]


def test_duplicates_keep_the_last_value_in_the_first_place_every_cycle() -> None:
    memo = FamilyMemo()
    rows = (("a", GPU0, 1.0), ("a", GPU1, 2.0), ("a", GPU0, 3.0))
    for _ in range(3):  # the memo must never hand the duplicate on
        assert series_of(built(memo, *rows), "a") == [(GPU0, 3.0), (GPU1, 2.0)]
    assert series_of(built(None, *rows), "a") == [(GPU0, 3.0), (GPU1, 2.0)]


def test_the_encoder_keeps_a_familys_text_with_that_family_only() -> None:
    cache = prom_text.SeriesText()
    family = Family("x", "gauge", "X.", (Series(GPU0, 1.0),))
    text = cache.text(family)
    assert cache.text(family) is text, "the same family object: its kept text"
    equal = Family("x", "gauge", "X.", (Series(GPU0, 2.0),))
    assert cache.text(equal) == '# HELP x X.\n# TYPE x gauge\nx{gpu="0"} 2'
    for n in range(3 * prom_text.SWEEP_EVERY):  # bounded: names that come and go, swept
        named = Family(f"y{n}", "gauge", "Y.", (Series((), float(n)),))
        assert prom_text.encode(PromBatch(0, (named,)), cache).endswith(f"y{n} {n}\n")
    assert len(cache._families) <= prom_text.SWEEP_EVERY


def with_first_device(c: CycleData, **changes: object) -> CycleData:
    devices = (replaced(c.snapshot.devices[0], **changes), *c.snapshot.devices[1:])
    return replaced(c, snapshot=replaced(c.snapshot, devices=devices))


def cycles() -> Iterator[CycleData]:
    """A run of cycles where something changes each time (and nothing, once)."""
    c = cycle()
    yield c
    yield c
    yield (c := with_first_device(c, power_watts=351.25, energy_joules=1400.0))
    yield (c := with_first_device(c, clock_event_reasons=frozenset({"hw_slowdown", "sw_thermal"})))
    health = dict(c.health)
    health["GPU-aaaa"] = HealthReport({"ecc": 2, "xid": 2, "lost": 0, "pcie": 1}, last_xid=79)
    yield (c := replaced(c, health=health))
    yield replaced(c, snapshot=replaced(c.snapshot, devices=c.snapshot.devices[1:]))
    yield c
    yield with_first_device(c, ecc=None, gpm=None, nvlink_errors=None, nvlink=(), xid_counts={})


@pytest.mark.parametrize("schema", [falcon_gpu, dcgm])
def test_a_run_of_cycles_writes_what_fresh_caches_write(schema: Any) -> None:
    render: Callable[..., PromBatch] = schema.render
    caches = schema.Caches()
    cache = prom_text.SeriesText()
    texts = []
    for c in cycles():
        kept = prom_text.encode(render(c, kept=caches), cache)
        fresh = prom_text.encode(render(c), prom_text.SeriesText())
        assert kept == fresh
        texts.append(kept)
    assert texts[1] == texts[0] and texts[6] == texts[4], "the same cycle again: the same text"
    assert "} 351.25\n" in texts[2] and "} 351.25\n" not in texts[1], "a changed value shows"
    assert texts[3] != texts[2], "changed clock-event reasons show"
    assert 'uuid="GPU-aaaa"' in texts[4] and "GPU-aaaa" not in texts[5], "a GPU that goes is gone"
    ecc = "falcon_gpu_ecc_errors_total{" if schema is falcon_gpu else "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{"
    assert ecc in texts[6] and ecc not in texts[7], "a reading that goes takes its series"


def test_changed_health_checks_show() -> None:
    c = cycle()
    kept = falcon_gpu.Caches()
    first = prom_text.encode(falcon_gpu.render(c, kept=kept))
    health = dict(c.health)
    health["GPU-aaaa"] = HealthReport({"ecc": 2, "xid": 2, "lost": 0, "pcie": 1}, last_xid=79)
    second = prom_text.encode(falcon_gpu.render(replaced(c, health=health), kept=kept))
    line = 'falcon_gpu_health{node="node-a",gpu="0",uuid="GPU-aaaa",model="NVIDIA H100 80GB HBM3",check='
    assert line + '"ecc"} 0\n' in first and line + '"pcie"' not in first
    assert line + '"ecc"} 2\n' in second and line + '"pcie"} 1\n' in second
    assert prom_text.encode(falcon_gpu.render(c, kept=kept)) == first, "and back"


BLOCK = RowBlock(SPECS, (float, lambda v: v / 1000))


def from_rows(memo: FamilyMemo | None, *rows: tuple[Labels, tuple[Any, ...]]) -> tuple[Family, ...]:
    b = FamilyBuilder(SPECS, memo)
    b.rows(BLOCK).extend(rows)
    return b.families()


def test_a_row_blocks_columns_are_kept_converted_and_dropped_like_other_series() -> None:
    memo = FamilyMemo()
    one = from_rows(memo, (GPU0, (1, 5000)), (GPU1, (2, None)))
    assert series_of(one, "a") == [(GPU0, 1.0), (GPU1, 2.0)] and series_of(one, "b_total") == [(GPU0, 5.0)]
    two = from_rows(memo, (GPU0, (1, 6000)), (GPU1, (2, None)))
    assert two[0] is one[0], "an unchanged column is last cycle's family"
    assert two[1] is not one[1] and series_of(two, "b_total") == [(GPU0, 6.0)], "converted when it changed"
    gone = from_rows(memo, (GPU1, (2, None)))
    assert series_of(gone, "a") == [(GPU1, 2.0)] and [f.name for f in gone] == ["a"], "no value: no family"
    assert from_rows(memo, (GPU1, (2, None)))[0] is gone[0]
    dup = ((GPU0, (1, None)), (GPU1, (2, None)), (GPU0, (3, None)))
    for _ in range(2):
        assert series_of(from_rows(memo, *dup), "a") == [(GPU0, 3.0), (GPU1, 2.0)]
    assert series_of(from_rows(None, *dup), "a") == [(GPU0, 3.0), (GPU1, 2.0)]
    assert series_of(from_rows(memo, (GPU0, (1, None)), (GPU1, (2, None)), (GPU0, (None, None))), "a") == [
        (GPU0, 1.0),
        (GPU1, 2.0),
    ]
    now = from_rows(memo, (GPU0, (4, None)), (GPU1, (None, None)), (GPU0, (5, None)))
    assert series_of(now, "a") == [(GPU0, 5.0)], "the same rows, other readings present: still deduplicated"
    assert len(memo) == 2


def test_a_block_metric_cannot_also_be_put() -> None:
    b = FamilyBuilder(SPECS)
    b.rows(BLOCK).append((GPU0, (1, 2)))
    b.put("a", GPU1, 3)
    with pytest.raises(ValueError, match="a: a block's metric"):
        b.families()
    with pytest.raises(ValueError, match="not rendered"):
        falcon_gpu_device.SCALARS.add_fields(FamilyBuilder(falcon_gpu.SPECS), GPU0, no_such_reading=1)
