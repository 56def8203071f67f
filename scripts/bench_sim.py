#!/usr/bin/env python3
"""The simulated NVML library's own CPU per cycle, for falcon_gpu's calls and for the peer's.

``bench_peer.py --breakdown`` times every simulated call through a wrapper that costs about as much
as a cheap call itself, on a busy machine. Here one steady cycle (after warm-up) of each side on the
synthetic node (``gen_scenario.py``) is recorded, function and arguments, and then replayed straight
into a fresh ``SimulatedNvml`` of the same node, cycle after cycle (``nvmlDeviceGetCount`` starts
each; a process-samples call asks for what is newer than the previous cycle, as both sides do);
the fastest of ``--rounds`` cycles is kept. That is the simulator's cost alone, which on a GPU node
is the driver's: it says nothing about falcon_gpu's own work.

Usage: python scripts/bench_sim.py [--rounds 300]
"""

from __future__ import annotations

import argparse
import time
from typing import Any, cast

import pynvml
from bench_common import load_nvml, load_scenario, make_runner, write_scenario
from bench_peer import LastText, PeerExporter

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


if __name__ == "__main__":
    main()
