#!/usr/bin/env python3
"""What GPM, PCIe and NVLink cost: one cycle's CPU and NVML calls per GPU, with and without them.

The same synthetic node (``gen_scenario.py``) three times: GPUs without GPM/PCIe/NVLink ("neither":
those readings answer NOT_SUPPORTED once and are not asked again, i.e. the cost before issue 11),
the same GPUs answering GPM and PCIe counters (an H100 PCIe), and answering GPM, PCIe and 18 NVLinks
(an H100 SXM). The runners alternate cycle by cycle in one process, so machine load hits them
alike; median CPU time per cycle (collect + health + ``falcon_gpu`` schema + Prometheus text) over
the measured cycles after 3 warm-up cycles, and the same minus the CPU spent inside the simulated
NVML library (on a GPU node that part is the driver's, measured by the device check). NVML calls
are counted by the simulator (``SimulatedNvml.calls``) over the measured cycles.
Usage: python scripts/bench_gpm.py [--cycles 300]
"""

from __future__ import annotations

import argparse
import io
import time
from typing import Any

from bench_common import make_runner, median_ms, write_scenario

from falcon_gpu.agent.loop import settle_heap


class NvmlClock:
    """CPU time spent inside the simulated NVML library (its functions wrapped on the instance):
    on a GPU node that part is the driver's, so falcon_gpu's own cost is the cycle minus it."""

    def __init__(self, sim: Any) -> None:
        self.seconds = 0.0
        for name in dir(type(sim)):
            if name.startswith("nvml") and callable(getattr(sim, name)):
                setattr(sim, name, self._timed(getattr(sim, name)))

    def _timed(self, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - t0

        return timed


CONFIGS = {"neither": (False, 0), "GPM + PCIe": (True, 0), "GPM + PCIe + 18 NVLinks": (True, 18)}
"""Name -> (GPM and PCIe answered, NVLinks per GPU)."""


def measure(gpus: int, procs: int, cycles: int) -> dict[str, tuple[float, float, float, int]]:
    """Per configuration: median cycle CPU ms, median own CPU ms, NVML calls/GPU/cycle, text bytes."""
    sinks = {name: io.StringIO() for name in CONFIGS}
    runners = {
        name: make_runner(write_scenario(gpus, procs, profiling=on, links=links), sinks[name])
        for name, (on, links) in CONFIGS.items()
    }
    for _ in range(3):
        for r in runners.values():
            r.run()
    settle_heap()  # as `falcon-gpu run` does before its first cycle (agent/loop.py)
    sims = {name: r.source.caller.lib for name, r in runners.items()}  # type: ignore[attr-defined]
    clocks = {name: NvmlClock(sim) for name, sim in sims.items()}
    before = {name: sum(s.calls.values()) for name, s in sims.items()}
    times: dict[str, list[float]] = {name: [] for name in runners}
    own: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(cycles):
        for name, r in runners.items():
            sinks[name].seek(0)
            sinks[name].truncate()
            inside = clocks[name].seconds
            t0 = time.process_time()
            r.run()
            spent = time.process_time() - t0
            times[name].append(spent)
            own[name].append(spent - (clocks[name].seconds - inside))
    return {
        name: (
            median_ms(times[name]),
            median_ms(own[name]),
            (sum(sims[name].calls.values()) - before[name]) / cycles / gpus,
            len(sinks[name].getvalue()),
        )
        for name in runners
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=300)
    a = ap.parse_args()
    print("| node | answers | cycle CPU ms | added | falcon_gpu's own CPU ms (cycle minus simulated NVML) "
          "| added | NVML calls/GPU/cycle | text bytes |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for gpus, procs in ((8, 64), (16, 256)):
        m = measure(gpus, procs, a.cycles)
        t0, o0, _, _ = m["neither"]
        for name, (t, o, calls, size) in m.items():
            print(f"| {gpus} GPUs x {procs} processes | {name} | {t:.2f} | {100 * (t / t0 - 1):+.0f} % "
                  f"| {o:.2f} | {100 * (o / o0 - 1):+.0f} % | {calls:.1f} | {size} |")  # fmt: skip


if __name__ == "__main__":
    main()
