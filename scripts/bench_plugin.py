#!/usr/bin/env python3
"""Wall time of the Open-Falcon plugin, process start to exit, on a simulated 8-GPU node.

falcon-agent forks the plugin every minute on every node, so start-up is what counts.
Peers in the same run: a bare ``python3 -c pass`` (the interpreter floor) and a
python that only imports pynvml and prints ``[]`` (the least any NVML plugin does).
The plugin is measured twice: with its settings cache emptied before every run (it
validates with pydantic, as the first run after a config change does) and with the
cache in place (every other run under falcon-agent). Commands alternate, so a busy
machine slows every row alike; the cache lives in a temporary ``XDG_CACHE_HOME``.
``--instructions`` adds each command's user-space instruction count, one run under valgrind's
callgrind: it does not move with the machine's load, so before/after figures from a shared
machine stay comparable (wall time there can triple while other jobs run).
``--dataclasses`` counts the dataclasses a cached run builds and what building the same classes
(same field counts and options) costs alone, by package.
Usage: python scripts/bench_plugin.py [--runs 20] [--python VENV/bin/python [--python OTHER/bin/python]]
[--instructions | --breakdown | --dataclasses]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import instructions, write_scenario

PLUGIN = Path(__file__).resolve().parent.parent / "plugins" / "60_gpu_monitor.py"


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    return time.perf_counter() - t0


BREAKDOWN = (  # cumulative: each step's code runs after the steps above it, so its count is its own cost
    ("interpreter", "pass"),
    ("stdlib the plugin needs (logging, json, pathlib, typing, threading)",
     "import logging, json, pathlib, typing, threading"),
    ("cli (argparse) + settings from the cache",
     "import falcon_gpu.cli, falcon_gpu.settings_cache as sc; sc.plugin_settings(None, {})"),
    ("pynvml", "import pynvml"),
    ("model/ (its value classes)", "import falcon_gpu.model.cycle"),
    ("sources/nvml/", "import falcon_gpu.sources.nvml.source, falcon_gpu.sources.nvml.xid"),
    ("attribution/", "import falcon_gpu.attribution"),
    ("agent/, health/, schemas/ (openfalcon)", "import falcon_gpu.agent.commands"),
    ("simulator/ (--simulate only)",
     "import falcon_gpu.simulator.scenario.parse, falcon_gpu.simulator.nvml.library"),
    ("the run: build, one cycle, close", "import falcon_gpu.cli as c, sys, io; sys.stdout = io.StringIO(); "
     "c.main(['plugin', '--simulate', SCENARIO])"),
)  # fmt: skip
"""Where the cached plugin's instructions go (``--breakdown``)."""

Row = tuple[str, list[str], bool]
"""(name, command, empty the settings cache before each run)"""


def rows_for(python: str, scenario: Path, label: str) -> list[Row]:
    plugin = [python, str(PLUGIN), "--simulate", str(scenario)]
    return [
        (f"{label}python3 -c pass (floor)", [python, "-c", "pass"], False),
        (f"{label}python3: import pynvml, print []", [python, "-c", "import pynvml; print('[]')"], False),
        (f"{label}60_gpu_monitor.py --simulate (8 GPUs, 64 processes), settings validated", plugin, True),
        (f"{label}60_gpu_monitor.py --simulate (8 GPUs, 64 processes), settings cached", plugin, False),
    ]


def breakdown(python: str, scenario: Path) -> None:
    """Instructions of each part of a cached plugin run, importing the parts one after another."""
    cache = Path(tempfile.mkdtemp(prefix="bench-plugin-cache-"))
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    try:
        subprocess.run([python, str(PLUGIN), "--simulate", str(scenario)], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        code, before = "", 0
        print("| part | instructions (M) |\n|---|---|")
        for name, step in BREAKDOWN:
            code += step.replace("SCENARIO", repr(str(scenario))) + "\n"
            total = instructions([python, "-c", code], env)
            print(f"| {name} | {(total - before) / 1e6:.0f} |")
            before = total
        print(f"| total | {before / 1e6:.0f} |")
    finally:
        shutil.rmtree(cache, ignore_errors=True)


COUNT_DATACLASSES = """
import contextlib, dataclasses, io, json, sys
seen = []
build = dataclasses._process_class
def counted(cls, *args):
    made = build(cls, *args)
    parts = cls.__module__.split(".")
    package = parts[1] if parts[0] == "falcon_gpu" else parts[0]
    seen.append([package, len(dataclasses.fields(made)), list(args)])
    return made
dataclasses._process_class = counted
from falcon_gpu.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(["plugin", "--simulate", sys.argv[1]])
print(json.dumps(seen))
"""
OPTIONS = ("init", "repr", "eq", "order", "unsafe_hash", "frozen", "match_args", "kw_only", "slots")


def classes_source(seen: list[tuple[str, int, list[bool]]], named_tuples: bool = False) -> str:
    """The same classes with ``int`` fields: what building them costs, apart from their modules
    (``named_tuples``: as ``typing.NamedTuple`` instead, what a conversion would leave)."""
    out = ["import dataclasses, typing"]
    for i, (_, fields, args) in enumerate(seen):
        options = ", ".join(f"{k}={v}" for k, v in zip(OPTIONS, args, strict=False))
        body = "".join(f"\n    f{j}: int" for j in range(fields)) or "\n    pass"
        head = (
            f"class C{i}(typing.NamedTuple):"
            if named_tuples
            else f"@dataclasses.dataclass({options})\nclass C{i}:"
        )
        out.append(head + body)
    return "\n".join(out) + "\n"


def dataclass_costs(python: str, scenario: Path) -> None:
    """Dataclasses a cached plugin run builds, and their build cost alone, by package."""
    cache = Path(tempfile.mkdtemp(prefix="bench-plugin-cache-"))
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    try:
        subprocess.run([python, str(PLUGIN), "--simulate", str(scenario)], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip  # the cache
        found = subprocess.run([python, "-c", COUNT_DATACLASSES, str(scenario)], env=env, check=True,
                               capture_output=True, text=True).stdout  # fmt: skip
        seen = json.loads(found.splitlines()[-1])
        if not seen:
            print("no dataclass is built on the cached plugin path")
            return
        base = instructions([python, "-c", "import dataclasses, typing"], env)
        print("| package | classes | fields | build cost (M) | as NamedTuples (M) |\n|---|---|---|---|---|")
        for package in [*sorted({s[0] for s in seen}), None]:
            mine = [s for s in seen if package is None or s[0] == package]
            costs = []
            for named_tuples in (False, True):
                source = cache / "classes.py"
                source.write_text(classes_source(mine, named_tuples))
                costs.append(f"{(instructions([python, str(source)], env) - base) / 1e6:.0f}")
            fields = sum(s[1] for s in mine)
            print(f"| {package or 'all'} | {len(mine)} | {fields} | {' | '.join(costs)} |")
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument(
        "--python",
        action="append",
        help="interpreter with falcon-gpu installed (e.g. a clean venv's, non-editable); give it twice "
        "to compare two installations in one run (default: this interpreter)",
    )
    ap.add_argument("--instructions", action="store_true", help="also count instructions (valgrind)")
    ap.add_argument("--breakdown", action="store_true", help="instructions by part of the cached plugin")
    ap.add_argument("--dataclasses", action="store_true", help="dataclasses the cached plugin builds")
    a = ap.parse_args()
    pythons: list[str] = a.python or [sys.executable]
    path = write_scenario(8, 64)  # no host: a simulated kubelet server would be measured, not the plugin
    if a.breakdown:
        breakdown(pythons[-1], path)
        return
    if a.dataclasses:
        dataclass_costs(pythons[-1], path)
        return
    groups = [rows_for(py, path, f"{py}: " if len(pythons) > 1 else "") for py in pythons]
    cache = Path(tempfile.mkdtemp(prefix="bench-plugin-cache-"))
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    times: dict[str, list[float]] = {name: [] for rows in groups for name, _, _ in rows}
    counts: dict[str, int] = {}
    try:
        for _ in range(a.runs):
            for rows in groups:
                for name, cmd, fresh in rows:
                    if fresh:
                        shutil.rmtree(cache / "falcon-gpu", ignore_errors=True)
                    times[name].append(timed(cmd, env))
        for name, cmd, fresh in [row for rows in groups for row in rows] if a.instructions else []:
            if fresh:
                shutil.rmtree(cache / "falcon-gpu", ignore_errors=True)
            counts[name] = instructions(cmd, env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    extra = " instructions (M) | vs floor |" if counts else ""
    print("| command | median wall ms | vs floor |" + extra)
    print("|---|---|---|" + ("---|---|" if counts else ""))
    for rows in groups:
        floor_name = rows[0][0]
        floor = statistics.median(times[floor_name]) * 1000
        for name, _, _ in rows:
            ms = statistics.median(times[name]) * 1000
            line = f"| {name} | {ms:.0f} | {ms / floor:.1f}x |"
            if counts:
                line += f" {counts[name] / 1e6:.0f} | {counts[name] / counts[floor_name]:.1f}x |"
            print(line)


if __name__ == "__main__":
    main()
