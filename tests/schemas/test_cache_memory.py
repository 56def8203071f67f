"""What the rendered-text and remote-write label caches hold per series (issue 19, item 11):
no copy of what they already keep (at 2,000 pods the copies were 7.7 MiB of the agent's 40)."""

from __future__ import annotations

import gc
import tracemalloc

from falcon_gpu.model.samples import Family, PromBatch, Series
from falcon_gpu.sinks.encoding.prom_text import SeriesText, encode
from falcon_gpu.sinks.remote_write.labels import LabelCache

POD_LABELS = (("node", "bench"), ("namespace", "bench"), ("container", "main"))


def _family(offset: float) -> Family:
    series = tuple(
        Series((*POD_LABELS, ("pod", f"job-{i}"), ("gpu", str(i % 8))), offset + i) for i in range(5000)
    )
    return Family("falcon_gpu_pod_utilization_ratio", "gauge", "help", series)


def test_the_text_cache_keeps_no_second_copy_of_each_line() -> None:
    """Two cycles of one family whose values all changed: what the cache holds is the lines (with
    their values) and the family's text, not also each line's prefix (was 6.1x the text)."""
    first, second = _family(0.5), _family(0.25)
    gc.collect()
    tracemalloc.start()
    try:
        cache = SeriesText()
        encode(PromBatch(0, (first,)), cache)
        text = encode(PromBatch(0, (second,)), cache)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - len(text)
    finally:
        tracemalloc.stop()
    assert held < 5.2 * len(text), held / len(text)
    assert text.count("\n") == 5002 and 'pod="job-4999",gpu="7"} 4999.25\n' in text


def test_the_label_cache_shares_the_series_pairs() -> None:
    cache = LabelCache(job="falcon_gpu", instance="bench")
    labels = (*POD_LABELS, ("pod", "job-1"))
    found = cache.series("falcon_gpu_pod_info", labels)
    assert dict(found) == {"__name__": "falcon_gpu_pod_info", "job": "falcon_gpu", "instance": "bench",
                           **dict(labels)}  # fmt: skip
    theirs = {id(pair) for pair in labels}
    assert sum(id(pair) in theirs for pair in found) == len(labels)  # not a copy of each
