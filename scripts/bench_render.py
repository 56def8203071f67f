#!/usr/bin/env python3
"""Everything after the snapshot, on captured cycles: health, the schema and the text encoder.

A synthetic node (``gen_scenario.py``) is run for ``--capture`` cycles; their snapshots are kept.
Then, ``--rounds`` times over, each kept snapshot goes through a health evaluator, the cycle's
schema (``falcon_gpu`` or ``dcgm``) and the Prometheus text encoder (or the Open-Falcon JSON one),
each timed with ``time.process_time``; the fastest round per stage is shown (the least disturbed by
a shared machine), in ms per cycle. The simulator and the readers are not in it: this is the part
``bench_peer.py --breakdown`` shows as health, schema and encoder, without its wrappers.

``--instructions`` instead counts user-space instructions (valgrind's callgrind, free of machine
load): the same script run twice under it, capturing and replaying 0 and ``--rounds`` rounds of
health + schema + Prometheus text; the difference per replayed cycle is shown, in millions.
Usage: python scripts/bench_render.py [--rounds 300] [--capture 8] [--profiling] [--schema dcgm]
       [--instructions]
"""

from __future__ import annotations

import argparse
import gc
import io
import re
import subprocess
import sys
import time

from bench_common import make_runner, write_scenario

from falcon_gpu.health import HealthEvaluator
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.schemas import openfalcon
from falcon_gpu.schemas.render import SchemaRenderer
from falcon_gpu.schemas.selection import EVERYTHING
from falcon_gpu.sinks.encoding import falcon_json, prom_text


def capture(gpus: int, procs: int, cycles: int, profiling: bool) -> list[CycleData]:
    runner = make_runner(write_scenario(gpus, procs, profiling=profiling), io.StringIO())
    runner.run()
    return [runner.run().cycle for _ in range(cycles)]


def measure(cycles: list[CycleData], rounds: int, schema: str) -> dict[str, float]:
    renderer = SchemaRenderer(schema)  # one agent's, its caches kept (and swept) across its cycles
    text, items = prom_text.SeriesText(), falcon_json.ItemText()  # its sinks' encoders'
    best = {"health": 1e9, "schema": 1e9, "encoder": 1e9, "openfalcon": 1e9}
    health = HealthEvaluator()
    clock = time.process_time
    for _ in range(rounds):
        spent = dict.fromkeys(best, 0.0)
        for cycle in cycles:
            t0 = clock()
            health.evaluate(cycle.snapshot)
            t1 = clock()
            batch = renderer.render(cycle, EVERYTHING)
            t2 = clock()
            prom_text.encode(batch, text)
            t3 = clock()
            falcon_json.text(openfalcon.render(cycle), allow_nan=True, cache=items)
            t4 = clock()
            spent["health"] += t1 - t0
            spent["schema"] += t2 - t1
            spent["encoder"] += t3 - t2
            spent["openfalcon"] += t4 - t3
        for k, v in spent.items():
            best[k] = min(best[k], v / len(cycles) * 1000)
    return best


def replay(gpus: int, procs: int, a: argparse.Namespace) -> None:
    """What ``--instructions`` counts: capture, one warm-up pass, then the rounds, nothing timed."""
    cycles = capture(gpus, procs, a.capture, a.profiling)
    renderer, text = SchemaRenderer(a.schema), prom_text.SeriesText()
    health = HealthEvaluator()
    for _ in range(a.rounds + 1):
        for cycle in cycles:
            health.evaluate(cycle.snapshot)
            prom_text.encode(renderer.render(cycle, EVERYTHING), text)


def instructions(gpus: int, procs: int, a: argparse.Namespace, rounds: int) -> int:
    flags = ["--profiling"] * a.profiling + ["--schema", a.schema, "--capture", str(a.capture)]
    cmd = [sys.executable, __file__, "--replay", f"{gpus}x{procs}", "--rounds", str(rounds), *flags]
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    found = re.search(r"Collected : (\d+)", out)
    if found is None:
        raise SystemExit(f"valgrind printed no instruction count:\n{out[-500:]}")
    return int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--capture", type=int, default=8)
    ap.add_argument("--profiling", action="store_true", help="GPM, PCIe and 18 NVLinks on every GPU")
    ap.add_argument("--schema", choices=("falcon_gpu", "dcgm"), default="falcon_gpu")
    ap.add_argument("--instructions", action="store_true", help="count instructions (valgrind) instead")
    ap.add_argument("--replay", help=argparse.SUPPRESS)  # GxP: what --instructions runs under valgrind
    a = ap.parse_args()
    if a.replay:
        gpus, procs = map(int, a.replay.split("x"))
        replay(gpus, procs, a)
        return
    if a.instructions:
        print("| node | health + schema + Prometheus text, M instructions per cycle |\n|---|---|")
        for gpus, procs in ((8, 64), (16, 256)):
            spent = instructions(gpus, procs, a, a.rounds) - instructions(gpus, procs, a, 0)
            print(f"| {gpus} x {procs} | {spent / (a.rounds * a.capture) / 1e6:.2f} |")
        return
    print(
        f"| node ({a.schema}{', GPM + PCIe + 18 NVLinks' if a.profiling else ''}) | health | schema "
        "| Prometheus text | Open-Falcon schema + JSON | series |"
    )
    print("|---|---|---|---|---|---|")
    for gpus, procs in ((8, 64), (16, 256)):
        cycles = capture(gpus, procs, a.capture, a.profiling)
        gc.freeze()  # as the agent does before its first cycle (agent/loop.py settle_heap)
        r = measure(cycles, a.rounds, a.schema)
        series = SchemaRenderer(a.schema).render(cycles[0], EVERYTHING).sample_count()
        print(
            f"| {gpus} x {procs} | {r['health']:.3f} | {r['schema']:.3f} | {r['encoder']:.3f} "
            f"| {r['openfalcon']:.3f} | {series} |"
        )


if __name__ == "__main__":
    main()
