#!/usr/bin/env python3
"""Resident memory of the agent over 1,000 cycles on a simulated 8-GPU node (64 processes).

Runs the same parts as ``falcon-gpu run`` (NVML source, health, schemas, stdout
sink writing to /dev/null) in this process and reads VmRSS. Peer in the same
run: this interpreter's RSS with everything imported but no cycle run yet.
Usage: python scripts/bench_memory.py [--cycles 1000]
"""

from __future__ import annotations

import argparse
import gc

from bench_common import make_runner, rss_kib, write_scenario


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=1000)
    a = ap.parse_args()
    path = write_scenario(8, 64)
    with open("/dev/null", "w") as devnull:
        runner = make_runner(path, devnull)
        gc.collect()
        base = rss_kib()
        marks = {}
        for i in range(1, a.cycles + 1):
            runner.run()
            if i in (1, 10, 100, 500, a.cycles):
                gc.collect()
                marks[i] = rss_kib()
    print(f"| after imports (peer) | {base / 1024:.1f} MB |")
    for i, kib in marks.items():
        print(f"| after cycle {i} | {kib / 1024:.1f} MB |")
    print(f"| growth cycle 100 -> {a.cycles} | {(marks[a.cycles] - marks[100]) / 1024:.2f} MB |")


if __name__ == "__main__":
    main()
