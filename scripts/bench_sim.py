#!/usr/bin/env python3
"""The simulated NVML library's own CPU per cycle, for falcon_gpu's calls and for the peer's.

``bench_peer.py --breakdown`` times every simulated call through a wrapper that costs about as much
as a cheap call itself, on a busy machine. Here one steady cycle (after warm-up) of each side on the
synthetic node (``gen_scenario.py``) is recorded, function and arguments, and then replayed straight
into a fresh ``SimulatedNvml`` of the same node, cycle after cycle (``nvmlDeviceGetCount`` starts
each; a process-samples call asks for what is newer than the previous cycle, as both sides do);
the fastest of ``--rounds`` cycles is kept. That is the simulator's cost alone, which on a GPU node
is the driver's: it says nothing about falcon_gpu's own work. A second table times single calls the
peer never makes, on one GPU with 18 NVLinks and every GPM metric (an H100 SXM): the NVLink field
values falcon_gpu asks, a GPM sample and the metrics between two (fastest of 5 x ``--rounds`` x 20).

Usage: python scripts/bench_sim.py [--rounds 300]
"""

from __future__ import annotations

import argparse
import time
import timeit
from typing import Any, cast

import pynvml
from bench_common import load_nvml, load_scenario, make_runner, write_scenario
from bench_peer import LastText, PeerExporter
from gen_scenario import scenario

Call = tuple[str, tuple[Any, ...]]


class Recorder:
    """The library, noting every ``nvml*`` call made through it while ``calls`` is a list."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self.calls: list[Call] | None = None

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._lib, name)
        if not name.startswith("nvml") or not callable(fn):
            return fn

        def call(*args: Any) -> Any:
            if self.calls is not None:
                self.calls.append((name, args))
            return fn(*args)

        return call


def replayed(path: Any, calls: list[Call], rounds: int) -> float:
    """The fastest cycle of ``calls`` against a fresh simulator, in seconds."""
    sim = load_nvml(load_scenario(path))
    sim.nvmlInit()
    plan = []
    for name, args in calls:  # the recorded handles are the other simulator's: this one's by index
        mine = tuple(sim.nvmlDeviceGetHandleByIndex(a.index) if hasattr(a, "gpu") else a for a in args)
        plan.append((getattr(sim, name), mine, name == "nvmlDeviceGetProcessUtilization"))
    best = float("inf")
    for _ in range(rounds + 3):
        t0 = time.process_time()
        for fn, args, since_last_cycle in plan:
            if since_last_cycle:
                args = (args[0], sim.stamp(sim.cycle - 1) or 0)
            try:
                fn(*args)
            except pynvml.NVMLError:  # an answer too (NOT_SUPPORTED, NOT_FOUND): the same on every branch
                continue
        best = min(best, time.process_time() - t0)
    return best


def record(gpus: int, procs: int) -> tuple[Any, list[Call], list[Call]]:
    """One steady cycle's calls of falcon_gpu and of the peer."""
    path = write_scenario(gpus, procs)
    runner = make_runner(path, cast(Any, LastText()))
    ours = Recorder(runner.source._nvml.lib)  # type: ignore[attr-defined]
    runner.source._nvml.lib = ours  # type: ignore[attr-defined]
    theirs = Recorder(load_nvml(load_scenario(path)))
    peer = PeerExporter(theirs)
    for _ in range(5):
        runner.run()
        peer.scrape()
    ours.calls, theirs.calls = [], []
    runner.run()
    peer.scrape()
    return path, ours.calls, theirs.calls


def single_calls(rounds: int) -> dict[str, float]:
    """µs per call of the NVLink field values and the GPM calls on one H100 SXM (see the docstring)."""
    from falcon_gpu.simulator.scenario.parse import parse_scenario
    from falcon_gpu.sources.nvml.gpm import METRICS

    sim = load_nvml(parse_scenario(scenario(1, 8, pods=False, with_profiling=True)))
    sim.nvmlInit()
    h = sim.nvmlDeviceGetHandleByIndex(0)
    older, newer = sim.nvmlGpmSampleAlloc(), sim.nvmlGpmSampleAlloc()
    sim.nvmlDeviceGetCount()
    sim.nvmlGpmSampleGet(h, older)
    sim.nvmlDeviceGetCount()
    sim.nvmlGpmSampleGet(h, newer)
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version, request.numMetrics = pynvml.NVML_GPM_METRICS_GET_VERSION, len(METRICS)
    for i, metric in enumerate(METRICS):
        request.metrics[i].metricId = metric
    request.sample1, request.sample2 = older, newer
    every = 0xFFFFFFFF  # scopeId: summed over the links
    traffic = (pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX)
    kinds = ("CRC_FLIT", "CRC_DATA", "REPLAY", "RECOVERY")
    nvlink = [
        *((f, every) for f in traffic),
        *(getattr(pynvml, f"NVML_FI_DEV_NVLINK_{k}_ERROR_COUNT_TOTAL") for k in kinds),
    ]
    calls = {
        "field values: NVLink sums, 4 error totals": lambda: sim.nvmlDeviceGetFieldValues(h, nvlink),
        "nvmlGpmSampleGet": lambda: sim.nvmlGpmSampleGet(h, newer),
        f"nvmlGpmMetricsGet, {len(METRICS)} metrics": lambda: sim.nvmlGpmMetricsGet(request),
    }  # fmt: skip
    n = rounds * 20
    return {name: min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6 for name, fn in calls.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=300)
    a = ap.parse_args()
    print("| node | side | calls/cycle | simulator µs/cycle (fastest) | µs/call |")
    print("|---|---|---|---|---|")
    for gpus, procs in ((8, 64), (16, 256)):
        path, ours, theirs = record(gpus, procs)
        for side, calls in (("falcon_gpu", ours), ("peer", theirs)):
            best = replayed(path, calls, a.rounds) * 1e6
            print(f"| {gpus} x {procs} | {side} | {len(calls)} | {best:.0f} | {best / len(calls):.2f} |")
    print("\n| call (one H100 SXM) | µs (fastest) |\n|---|---|")
    for name, micros in single_calls(a.rounds).items():
        print(f"| {name} | {micros:.1f} |")


if __name__ == "__main__":
    main()
