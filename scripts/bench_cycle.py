#!/usr/bin/env python3
"""CPU time of one cycle (collect + health + schemas + stdout encode) on a simulated node.

Peer, measured in the same run: the bare simulated-NVML calls alone (the same
readings fetched with no source, schema or encoder), i.e. the floor any NVML
exporter pays on this simulator; the ratio is falcon_gpu's own overhead.
Usage: python scripts/bench_cycle.py [--cycles 300]
"""

from __future__ import annotations

import argparse
import io
import time

from bench_common import load_nvml, load_scenario, make_runner, median_ms, write_scenario


def bare_calls(lib: object, count: int) -> None:
    n = lib.nvmlDeviceGetCount()  # type: ignore[attr-defined]
    for i in range(n):
        h = lib.nvmlDeviceGetHandleByIndex(i)  # type: ignore[attr-defined]
        for fn in (
            "nvmlDeviceGetMemoryInfo",
            "nvmlDeviceGetUtilizationRates",
            "nvmlDeviceGetPowerUsage",
            "nvmlDeviceGetTotalEnergyConsumption",
            "nvmlDeviceGetPerformanceState",
            "nvmlDeviceGetComputeRunningProcesses",
        ):
            getattr(lib, fn)(h)
        lib.nvmlDeviceGetTemperature(h, 0)  # type: ignore[attr-defined]


def measure(gpus: int, procs: int, cycles: int) -> tuple[float, float]:
    path = write_scenario(gpus, procs)
    sink = io.StringIO()
    runner = make_runner(path, sink)
    runner.run()
    ours = []
    for _ in range(cycles):
        sink.seek(0)
        sink.truncate()
        t0 = time.process_time()
        runner.run()
        ours.append(time.process_time() - t0)
    lib = load_nvml(load_scenario(path))
    lib.nvmlInit()  # type: ignore[attr-defined]
    peer = []
    for _ in range(cycles):
        t0 = time.process_time()
        bare_calls(lib, gpus)
        peer.append(time.process_time() - t0)
    return median_ms(ours), median_ms(peer)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=300)
    a = ap.parse_args()
    print("| node | falcon_gpu cycle, median CPU ms | bare NVML calls, median CPU ms | ratio | target |")
    print("|---|---|---|---|---|")
    for gpus, procs, target in ((8, 64, 5), (16, 256, 25)):
        ours, peer = measure(gpus, procs, a.cycles)
        node = f"{gpus} GPUs x {procs} processes"
        print(f"| {node} | {ours:.2f} | {peer:.2f} | {ours / peer:.1f}x | <= {target} ms |")


if __name__ == "__main__":
    main()
