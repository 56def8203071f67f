"""The Open-Falcon JSON text: byte for byte what json.dumps writes, from a bounded per-series cache."""

from __future__ import annotations

import json
import math

import pytest

from falcon_gpu.model.samples import FalconItem
from falcon_gpu.sinks.encoding import falcon_json


def item(
    value: float, ts: int = 1_700_000_000, tags: str = "gpu=0,uuid=GPU-1", metric: str = "gpu.util"
) -> FalconItem:
    return FalconItem("node-1", metric, ts, 60, value, "GAUGE", tags)


def reference(items: list[FalconItem], allow_nan: bool = False) -> str:
    return json.dumps([i.as_json() for i in items], separators=(",", ":"), allow_nan=allow_nan)


ODD = [
    item(0.5),
    item(2.0, tags='pod="a\\b"\nc,ns=é'),  # quotes, backslash, newline, non-ASCII: escaped as json does
    item(1e-300, metric="gpu.tiny"),
    item(123456789012345.0, metric="gpu.large"),
    item(7, metric="gpu.count"),  # an int, as a schema could pass one
    item(True, metric="gpu.up"),  # a bool
    FalconItem("node-1", "pod.energy", 1_700_000_060, 30, 5.25, "COUNTER", ""),
]


def test_the_text_is_what_json_dumps_writes_cycle_after_cycle() -> None:
    cache = falcon_json.ItemText()
    assert cache.text(ODD) == reference(ODD)
    later = [
        FalconItem(i.endpoint, i.metric, i.timestamp + 60, i.step, 0.125, i.counter_type, i.tags) for i in ODD
    ]
    assert cache.text(later) == reference(later)  # same series: new timestamps and values written
    assert len(cache) == len(ODD)
    assert falcon_json.encode(later) == reference(later).encode()


def test_a_changed_tag_or_metric_is_a_new_series() -> None:
    cache = falcon_json.ItemText()
    cache.text([item(1.0)])
    text = cache.text([item(1.0, tags="gpu=1,uuid=GPU-2"), item(1.0, metric="gpu.temp")])
    assert json.loads(text)[0]["tags"] == "gpu=1,uuid=GPU-2" and json.loads(text)[1]["metric"] == "gpu.temp"
    assert len(cache) == 3


def test_a_value_that_is_not_finite_is_refused_or_written_as_json_dumps_does() -> None:
    bad = [item(math.nan), item(math.inf), item(-math.inf)]
    with pytest.raises(ValueError, match="not JSON compliant"):
        falcon_json.ItemText().text(bad[:1])
    assert falcon_json.ItemText().text(bad, allow_nan=True) == reference(bad, allow_nan=True)


def test_the_cache_is_bounded() -> None:
    cache = falcon_json.ItemText(limit=10)
    for cycle in range(30):  # pods churning: a new tag set every cycle
        items = [item(1.0, tags=f"pod=job-{cycle}")]
        assert cache.text(items) == reference(items)
        assert len(cache) <= 10
