"""The Prometheus text encoder: exact output, label escaping, and its bounded series-text cache."""

from __future__ import annotations

import pytest

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
    first = prom_text.encode(batch(1.0, 2.0))
    assert prom_text.encode(batch(1.0, 2.0)) == first
    assert prom_text.encode(batch(7.0, 8.0)) == first.replace("} 1\n", "} 7\n").replace("} 2\n", "} 8\n")
    prefix = 'x_ratio{node="n1",pod="a\\"b\\\\c\\nd0"} '
    assert prom_text._series_text[("x_ratio", (("node", "n1"), ("pod", 'a"b\\c\nd0')))] == (
        prefix,
        7.0,
        prefix + "7",
    )


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prom_text, "MAX_CACHED", 10)
    monkeypatch.setattr(prom_text, "_series_text", {})
    for cycle in range(20):  # pods churning: new label sets every cycle
        text = prom_text.encode(batch(1.0, 2.0, 3.0, pod=f"job-{cycle}-"))
        assert f'pod="job-{cycle}-2"}} 3' in text
        assert len(prom_text._series_text) <= 10
