"""The Prometheus text encoder: exact output, label escaping, and its bounded series-text cache."""

from __future__ import annotations

import threading

from falcon_gpu.model.samples import Family, PromBatch, Series
from falcon_gpu.sinks.encoding import prom_text


def batch(*values: float, pod: str = 'a"b\\c\nd') -> PromBatch:
    series = tuple(Series((("node", "n1"), ("pod", f"{pod}{i}")), v) for i, v in enumerate(values))
    return PromBatch(
        0,
        (
            Family("x_ratio", "gauge", "A ratio.\nSecond line \\ here.", series),
            Family("x_empty", "gauge", "Left out.", ()),
            Family("x_total", "counter", "No labels.", (Series((), 3.0),)),
        ),
    )


def test_exact_text_with_escaping_and_values() -> None:
    text = prom_text.encode(batch(0.5, 2.0, float("nan")))
    assert text == (
        "# HELP x_ratio A ratio.\\nSecond line \\\\ here.\n"
        "# TYPE x_ratio gauge\n"
        'x_ratio{node="n1",pod="a\\"b\\\\c\\nd0"} 0.5\n'
        'x_ratio{node="n1",pod="a\\"b\\\\c\\nd1"} 2\n'
        'x_ratio{node="n1",pod="a\\"b\\\\c\\nd2"} NaN\n'
        "# HELP x_total No labels.\n"
        "# TYPE x_total counter\n"
        "x_total 3\n"
    )


def test_cached_series_text_is_reused_and_changed_values_are_formatted() -> None:
    cache = prom_text.SeriesText()
    first = prom_text.encode(batch(1.0, 2.0), cache)
    assert prom_text.encode(batch(1.0, 2.0), cache) == first
    assert len(cache) == 3
    changed = first.replace("} 1\n", "} 7\n").replace("} 2\n", "} 8\n")
    assert prom_text.encode(batch(7.0, 8.0), cache) == changed  # walked beside the last family
    assert len(cache) == 3  # a changed value adds no line
    one, two = batch(9.0, 8.0).families[0].series
    swapped = Family("x_ratio", "gauge", "A ratio.\nSecond line \\ here.", (two, one))
    prefix = 'x_ratio{node="n1",pod="a\\"b\\\\c\\nd'
    assert cache.text(swapped).endswith(f'{prefix}1"}} 8\n{prefix}0"}} 9')  # by the per-series cache
    assert cache.line("x_ratio", (("node", "n1"), ("pod", 'a"b\\c\nd0'))) == (9.0, prefix + '0"} 9')
    assert len(cache) == 3  # a changed value replaces its line, it adds none


def test_a_changed_label_set_is_a_new_series_and_the_old_one_is_not_written() -> None:
    cache = prom_text.SeriesText()
    prom_text.encode(batch(1.0, pod="a"), cache)
    text = prom_text.encode(batch(1.0, pod="b"), cache)
    assert 'x_ratio{node="n1",pod="b0"} 1\n' in text
    assert 'pod="a0"' not in text
    assert len(cache) == 3  # a0, b0 and the unlabelled x_total


def test_nan_is_written_every_cycle_and_a_value_after_it_too() -> None:
    cache = prom_text.SeriesText()
    assert "} NaN\n" in prom_text.encode(batch(float("nan")), cache)
    assert "} NaN\n" in prom_text.encode(batch(float("nan")), cache)
    assert "} 0.25\n" in prom_text.encode(batch(0.25), cache)


def test_the_shared_cache_gives_the_same_text_as_a_fresh_one() -> None:
    b = batch(0.5, 2.0, float("inf"))
    assert prom_text.encode(b) == prom_text.encode(b, prom_text.SeriesText()) == prom_text.encode(b)


def test_the_cache_is_bounded_by_the_series_encoded_since_its_last_sweep() -> None:
    cache = prom_text.SeriesText()
    every = prom_text.SWEEP_EVERY
    for cycle in range(3 * every):  # pods churning: new label sets every cycle
        text = prom_text.encode(batch(1.0, 2.0, 3.0, pod=f"job-{cycle}-"), cache)
        assert f'pod="job-{cycle}-2"}} 3' in text
        assert f'pod="job-{cycle - 1}-2"' not in text
        assert len(cache) <= 3 * every + 1, "the x_ratio series of the cycles since the sweep, x_total"
        if (cycle + 1) % every == 0:
            assert len(cache) == 4, "swept: this batch's series only"
    assert cache.line("x_ratio", (("node", "n1"), ("pod", "job-0-0"))) is None  # gone with its pod
    assert cache.line("x_total", ()) == (3.0, "x_total 3"), "a series there all along stays"


def test_a_cache_encoding_in_several_threads_at_once_still_writes_each_cycle() -> None:
    """Each sink owns its cache and encodes on one thread; used from three at once, it still writes
    every batch right (its dicts are replaced whole when swept, never emptied under a reader)."""
    cache = prom_text.SeriesText()
    failures: list[BaseException] = []

    def encode_many(offset: int) -> None:
        try:
            for cycle in range(300):
                pod = f"job-{(cycle + offset) % 40}-"
                text = prom_text.encode(batch(float(cycle), 2.0, pod=pod), cache)
                assert f'x_ratio{{node="n1",pod="{pod}0"}} {cycle}\n' in text
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=encode_many, args=(n * 7,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert len(cache) <= 40 * 2 + 1  # at most every pod's series and x_total
