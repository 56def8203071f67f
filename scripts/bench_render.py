#!/usr/bin/env python3
"""Everything after the snapshot, on captured cycles: health, the schema and the text encoder.

A synthetic node (``gen_scenario.py``) is run for ``--capture`` cycles; their snapshots are kept.
Then, ``--rounds`` times over, each kept snapshot goes through a health evaluator, the cycle's
schema (``falcon_gpu`` or ``dcgm``) and the Prometheus text encoder (or the Open-Falcon JSON one),
each timed with ``time.process_time``; the fastest round per stage is shown (the least disturbed by
a shared machine), in ms per cycle. The simulator and the readers are not in it: this is the part
``bench_peer.py --breakdown`` shows as health, schema and encoder, without its wrappers.
Usage: python scripts/bench_render.py [--rounds 300] [--capture 8] [--profiling] [--schema dcgm]
"""

from __future__ import annotations

import argparse
import gc
import io
import time

from bench_common import make_runner, write_scenario

from falcon_gpu.health import HealthEvaluator
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.schemas import dcgm, falcon_gpu, openfalcon
from falcon_gpu.sinks.encoding import falcon_json, prom_text


def capture(gpus: int, procs: int, cycles: int, profiling: bool) -> list[CycleData]:
    runner = make_runner(write_scenario(gpus, procs, profiling=profiling), io.StringIO())
    runner.run()
    return [runner.run().cycle for _ in range(cycles)]


def measure(cycles: list[CycleData], rounds: int, schema: str) -> dict[str, float]:
    render = dcgm.render if schema == "dcgm" else falcon_gpu.render
    best = {"health": 1e9, "schema": 1e9, "encoder": 1e9, "openfalcon": 1e9}
    health = HealthEvaluator()
    clock = time.process_time
    for _ in range(rounds):
        spent = dict.fromkeys(best, 0.0)
        for cycle in cycles:
            t0 = clock()
            health.evaluate(cycle.snapshot)
            t1 = clock()
            batch = render(cycle)
            t2 = clock()
            prom_text.encode(batch)
            t3 = clock()
            falcon_json.text(openfalcon.render(cycle), allow_nan=True)
            t4 = clock()
            spent["health"] += t1 - t0
            spent["schema"] += t2 - t1
            spent["encoder"] += t3 - t2
            spent["openfalcon"] += t4 - t3
        for k, v in spent.items():
            best[k] = min(best[k], v / len(cycles) * 1000)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--capture", type=int, default=8)
    ap.add_argument("--profiling", action="store_true", help="GPM, PCIe and 18 NVLinks on every GPU")
    ap.add_argument("--schema", choices=("falcon_gpu", "dcgm"), default="falcon_gpu")
    a = ap.parse_args()
    print(
        f"| node ({a.schema}{', GPM + PCIe + 18 NVLinks' if a.profiling else ''}) | health | schema "
        "| Prometheus text | Open-Falcon schema + JSON | series |"
    )
    print("|---|---|---|---|---|---|")
    for gpus, procs in ((8, 64), (16, 256)):
        cycles = capture(gpus, procs, a.capture, a.profiling)
        gc.freeze()  # as the agent does before its first cycle (agent/loop.py settle_heap)
        r = measure(cycles, a.rounds, a.schema)
        render = dcgm.render if a.schema == "dcgm" else falcon_gpu.render
        series = render(cycles[0]).sample_count()
        print(
            f"| {gpus} x {procs} | {r['health']:.3f} | {r['schema']:.3f} | {r['encoder']:.3f} "
            f"| {r['openfalcon']:.3f} | {series} |"
        )


if __name__ == "__main__":
    main()
