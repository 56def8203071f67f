#!/usr/bin/env python3
"""Python opcodes and calls per cycle, per function, of ``bench_peer.py``'s falcon_gpu cycle.

Where the interpreter's work in a cycle is, exactly (``sys.settrace`` with opcode events, so it does
not move with the machine's load): the cycle of ``bench_peer.py`` (NVML source on the synthetic node,
health, ``falcon_gpu`` schema, Prometheus text), after the same warm-up and frozen heap. Opcodes are
not instructions: work done inside C (a dict merge, ``struct.unpack``, an attribute look-up) counts
once however long it runs, so check a change with ``bench_peer.py --instructions`` too.
Usage: python scripts/bench_opcodes.py [--gpus 8] [--processes 64] [--cycles 20] [--top 40]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any, TextIO, cast

from bench_common import make_runner, write_scenario
from bench_peer import LastText

from falcon_gpu.agent.loop import settle_heap

Key = tuple[str, str]


def count(gpus: int, procs: int, cycles: int) -> tuple[Counter[Key], Counter[Key]]:
    """(opcodes, calls) per (file, function) over ``cycles`` cycles."""
    runner = make_runner(write_scenario(gpus, procs), cast(TextIO, LastText()))
    for _ in range(10):
        runner.run()
    settle_heap()
    opcodes: Counter[Key] = Counter()
    calls: Counter[Key] = Counter()

    def trace(frame: FrameType, event: str, _: Any) -> Any:
        code = frame.f_code
        key = (code.co_filename.rpartition("falcon_gpu/")[2] or Path(code.co_filename).name, code.co_name)
        if event == "call":
            calls[key] += 1
            frame.f_trace_opcodes = True
        elif event == "opcode":
            opcodes[key] += 1
        return trace

    sys.settrace(trace)
    try:
        for _ in range(cycles):
            runner.run()
    finally:
        sys.settrace(None)
    return opcodes, calls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--processes", type=int, default=64)
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    opcodes, calls = count(a.gpus, a.processes, a.cycles)
    total, n = sum(opcodes.values()), a.cycles
    print(f"{total / n:.0f} opcodes and {sum(calls.values()) / n:.0f} Python calls per cycle\n")
    by_file: Counter[str] = Counter()
    for (path, _), ops in opcodes.items():
        by_file[path] += ops
    print("| file | opcodes/cycle | share |\n|---|---|---|")
    for path, ops in by_file.most_common(a.top):
        print(f"| {path} | {ops / n:.0f} | {ops / total:.1%} |")
    print("\n| function | opcodes/cycle | calls/cycle |\n|---|---|---|")
    for (path, name), ops in opcodes.most_common(a.top):
        print(f"| {path}:{name} | {ops / n:.0f} | {calls[(path, name)] / n:.1f} |")


if __name__ == "__main__":
    main()
