#!/usr/bin/env python3
"""Wall time of the Open-Falcon plugin, process start to exit, on a simulated 8-GPU node.

falcon-agent forks the plugin every minute on every node, so start-up is what counts.
Peers in the same run: a bare ``python3 -c pass`` (the interpreter floor) and a
python that only imports pynvml and prints ``[]`` (the least any NVML plugin does).
Usage: python scripts/bench_plugin.py [--runs 20] [--python VENV/bin/python]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_common import write_scenario

PLUGIN = Path(__file__).resolve().parent.parent / "plugins" / "60_gpu_monitor.py"


def wall(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter with falcon-gpu installed (e.g. a clean venv's, non-editable)",
    )
    a = ap.parse_args()
    path = write_scenario(8, 64)  # no host: a simulated kubelet server would be measured, not the plugin
    rows = [
        ("python3 -c pass (floor)", [a.python, "-c", "pass"]),
        ("python3: import pynvml, print []", [a.python, "-c", "import pynvml; print('[]')"]),
        (
            "60_gpu_monitor.py --simulate (8 GPUs, 64 processes)",
            [a.python, str(PLUGIN), "--simulate", str(path)],
        ),
    ]
    results = [(name, wall(cmd, a.runs)) for name, cmd in rows]
    floor = results[0][1]
    print("| command | median wall ms | vs floor |")
    print("|---|---|---|")
    for name, ms in results:
        print(f"| {name} | {ms:.0f} | {ms / floor:.1f}x |")


if __name__ == "__main__":
    main()
