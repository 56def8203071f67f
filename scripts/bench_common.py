"""Helpers shared by the benchmark scripts: a synthetic node, a cycle runner, RSS, medians."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_scenario import scenario

from falcon_gpu.agent.cycle import CycleRunner
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.simulator.scenario.parse import load_scenario
from falcon_gpu.sinks.config import StdoutSinkConfig
from falcon_gpu.sinks.stdout import StdoutSink
from falcon_gpu.sources.nvml.library import load_nvml
from falcon_gpu.sources.nvml.source import NvmlSource


def write_scenario(
    gpus: int, processes: int, pods: bool = False, profiling: bool = False, links: int = 18
) -> Path:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fd:
        json.dump(scenario(gpus, processes, pods, profiling, links), fd)
    return Path(fd.name)


def make_runner(path: Path, stream: TextIO, fmt: str = "prometheus") -> CycleRunner:
    """collect + health + schemas + stdout encode, no attribution (measured on its own)."""
    telemetry = Telemetry()
    lib = load_nvml(load_scenario(path))
    sink = StdoutSink(StdoutSinkConfig(type="stdout", format=fmt), telemetry=telemetry, stream=stream)  # type: ignore[arg-type]
    return CycleRunner(
        node="bench",
        step=30,
        source=NvmlSource(lib, telemetry),
        attributor=None,
        sinks=[sink],
        telemetry=telemetry,
    )


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def median_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def instructions(cmd: list[str], env: dict[str, str] | None = None) -> int:
    """User-space instructions of one run (valgrind's callgrind, which prints ``Collected : N``): a count
    that does not move with the machine's load, for before/after figures on a shared machine."""
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
        env=env,
    )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if found is None:
        raise SystemExit(f"valgrind printed no instruction count:\n{proc.stderr[-500:]}")
    return int(found.group(1))
