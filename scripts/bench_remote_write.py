#!/usr/bin/env python3
"""remote_write encode throughput (protobuf + snappy block), samples/s on one core.

The same samples, side by side in one run:
- falcon_gpu: ``PromBatch`` -> validated, sorted label sets (LabelCache) -> WriteRequest written
  directly in wire format with cached label bytes (V1Encoder) -> snappy block; batches of 2000.
- prometheus-remote-writer (PyPI), its own encode path without the HTTP post:
  ``_convert_to_timeseries`` -> ``_iter_batches`` (2000 series) -> ``_build_message``
  (generated protobuf classes + python-snappy). Timed twice: from its input dicts (encode only),
  and including building those dicts from the same ``PromBatch`` (what a caller pays).
- the straightforward baseline: our generated ``remote_v1_pb2`` classes filled field by field.

Samples: the cycles of a simulated 16-GPU node (scripts/gen_scenario.py), rendered by the real
schema. CPU time (time.process_time), median of --repeats runs.
Usage: python scripts/bench_remote_write.py [--cycles 40] [--repeats 7]
"""

from __future__ import annotations

import argparse
import io
import multiprocessing
import statistics
import time
from collections.abc import Callable
from typing import Any

import cramjam
from bench_common import make_runner, write_scenario

from falcon_gpu.model.samples import PromBatch
from falcon_gpu.sinks.remote_write.encode_v1 import RwSample, V1Encoder
from falcon_gpu.sinks.remote_write.labels import LabelCache

BATCH = 2000


def cycles(gpus: int, n: int) -> list[PromBatch]:
    runner = make_runner(write_scenario(gpus, gpus * 2), io.StringIO())
    out = []
    for i in range(n):
        batch = runner.run().prometheus
        out.append(PromBatch(1_800_000_000_000 + i * 15_000, batch.families))
    return out


def ours(batches: list[PromBatch]) -> int:
    labels, encoder = LabelCache(), V1Encoder()
    size = 0
    pending: list[RwSample] = []
    for b in batches:
        for fam in b.families:
            for s in fam.series:
                pending.append((labels.series(fam.name, s.labels), b.timestamp_ms, s.value))
        while len(pending) >= BATCH:
            size += len(encoder.encode(pending[:BATCH]))
            del pending[:BATCH]
    return size + (len(encoder.encode(pending)) if pending else 0)


def as_dicts(batches: list[PromBatch]) -> list[dict[str, Any]]:
    return [
        {
            "metric": {"__name__": fam.name, **dict(s.labels)},
            "values": [s.value],
            "timestamps": [b.timestamp_ms],
        }
        for b in batches
        for fam in b.families
        for s in fam.series
    ]


def theirs(writer: Any, items: list[dict[str, Any]]) -> int:
    timeseries, _ = writer._convert_to_timeseries(items)
    return sum(len(writer._build_message(batch)) for batch in writer._iter_batches(timeseries))


def generated(batches: list[PromBatch]) -> int:
    # imported here: prometheus-remote-writer registers the same proto package ("prometheus") in
    # protobuf's global descriptor pool, so the two cannot share a process (see _peer)
    from falcon_gpu.sinks.remote_write.proto import remote_v1_pb2

    size = 0
    request = remote_v1_pb2.WriteRequest()
    count = 0
    for b in batches:
        for fam in b.families:
            for s in fam.series:
                ts = request.timeseries.add()
                for k, v in sorted((("__name__", fam.name), *s.labels)):
                    lb = ts.labels.add()
                    lb.name, lb.value = k, v
                sample = ts.samples.add()
                sample.value, sample.timestamp = s.value, b.timestamp_ms
                count += 1
                if count == BATCH:
                    size += len(cramjam.snappy.compress_raw(request.SerializeToString()))
                    request, count = remote_v1_pb2.WriteRequest(), 0
    return size + len(cramjam.snappy.compress_raw(request.SerializeToString()))


def _peer(batches: list[PromBatch], repeats: int) -> dict[str, float] | None:
    try:
        from prometheus_remote_writer import RemoteWriter
    except ImportError:
        return None
    writer = RemoteWriter(
        url="http://127.0.0.1:9/api/v1/write", max_series_per_request=BATCH, sort_labels=True
    )
    items = as_dicts(batches)
    return {
        "prometheus-remote-writer, encode only": timed(lambda: theirs(writer, items), repeats),
        "prometheus-remote-writer, incl. building its dicts": timed(
            lambda: theirs(writer, as_dicts(batches)), repeats
        ),
    }


def timed(fn: Callable[[], object], repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        runs.append(time.process_time() - t0)
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=16)
    ap.add_argument("--cycles", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args()
    batches = cycles(a.gpus, a.cycles)
    n = sum(b.sample_count() for b in batches)
    print(
        f"{n} samples ({n // a.cycles} per cycle of a {a.gpus}-GPU node, {a.cycles} cycles), "
        f"median CPU time of {a.repeats} runs"
    )
    results = {
        "falcon_gpu (V1Encoder)": timed(lambda: ours(batches), a.repeats),
        "generated protobuf classes": timed(lambda: generated(batches), a.repeats),
    }
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:  # same samples, same script run, its own protobuf descriptor pool
        peer = pool.apply(_peer, (batches, a.repeats))
    if peer is None:
        print("prometheus-remote-writer is not installed (pip install prometheus-remote-writer): skipped")
    else:
        results.update(peer)
    base = results["falcon_gpu (V1Encoder)"]
    print(f"{'encoder':<52} {'samples/s':>12} {'vs falcon_gpu':>14}")
    for name, secs in results.items():
        print(f"{name:<52} {n / secs:>12,.0f} {secs / base:>13.2f}x")


if __name__ == "__main__":
    main()
