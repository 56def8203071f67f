#!/usr/bin/env python3
"""Resident memory of the agent over 1,000 cycles on a simulated 8-GPU node (64 processes).

Runs the same parts as ``falcon-gpu run`` (NVML source, health, schemas, stdout
sink writing to /dev/null) in this process and reads VmRSS. Peer in the same
run: this interpreter's RSS with everything imported but no cycle run yet.

With ``--refused`` every cycle also goes through a remote_write sink's
``explode`` and ``encode`` (no receiver: the network part is measured in
bench_spool.py) with one series the validator refuses (an invalid label name)
added to each cycle: a refused series must not cost memory cycle after cycle.

Usage: python scripts/bench_memory.py [--cycles 1000] [--refused]
"""

from __future__ import annotations

import argparse
import gc
from dataclasses import dataclass

from bench_common import make_runner, rss_kib, write_scenario

from falcon_gpu.model.samples import FalconItem, Family, PromBatch, Series
from falcon_gpu.sinks.base import Rendered
from falcon_gpu.sinks.config import RemoteWriteSinkConfig
from falcon_gpu.sinks.remote_write import RemoteWritePusher
from falcon_gpu.telemetry import Telemetry

REFUSED = Family("falcon_gpu_bench_info", "gauge", "", (Series((("bad-label", "x"),), 1.0),))


@dataclass(frozen=True)
class WithRefused:
    """A rendered cycle plus one series Prometheus would refuse."""

    prometheus: PromBatch
    falcon: tuple[FalconItem, ...] = ()


def remote_write() -> RemoteWritePusher:
    """The sink's pusher alone: ``explode`` and ``encode`` are all this measures."""
    cfg = RemoteWriteSinkConfig(type="remote_write", url="http://127.0.0.1:9/api/v1/write")
    return RemoteWritePusher(cfg, telemetry=Telemetry(), node="bench")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument(
        "--refused",
        action="store_true",
        help="also explode + encode for remote_write, one refused series a cycle",
    )
    a = ap.parse_args()
    path = write_scenario(8, 64)
    sink = remote_write() if a.refused else None
    marks_at = {1, 10, 100, 500, 1000, a.cycles}
    with open("/dev/null", "w") as devnull:
        runner = make_runner(path, devnull)
        gc.collect()
        base = rss_kib()
        marks = {}
        for i in range(1, a.cycles + 1):
            rendered: Rendered = runner.run()
            if sink is not None:
                batch = rendered.prometheus
                cycle = WithRefused(PromBatch(batch.timestamp_ms, (*batch.families, REFUSED)))
                sink.encode(sink.explode(cycle))
            if i in marks_at:
                gc.collect()
                marks[i] = rss_kib()
    print(f"| after imports (peer) | {base / 1024:.1f} MB |")
    for i, kib in sorted(marks.items()):
        print(f"| after cycle {i} | {kib / 1024:.1f} MB |")
    print(f"| growth cycle 100 -> {a.cycles} | {(marks[a.cycles] - marks[100]) / 1024:.2f} MB |")


if __name__ == "__main__":
    main()
