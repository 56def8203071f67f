#!/usr/bin/env python3
"""What policies and job records add to a cycle: CPU per cycle of the policy engine and the job
tracker, against the whole cycle measured in the same run.

Node: the synthetic scenario of bench_cycle (every reading on every GPU), 4 containers per GPU in
the attribution each cycle, 8 policies watching every GPU (one of each condition), the job tracker
writing to a temporary ``jobs_dir`` (saves every 10 cycles, as in the agent).
Usage: python scripts/bench_policies_jobs.py [--cycles 300]
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

from bench_common import load_nvml, load_scenario, make_runner, median_ms, write_scenario

from falcon_gpu.health import HealthEvaluator
from falcon_gpu.jobs.records_file import JobLog
from falcon_gpu.jobs.state import StateFile
from falcon_gpu.jobs.tracker import JobTracker
from falcon_gpu.model.attribution import Attribution, ContainerRef, PodUsage
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.policies import PolicyConfig, PolicyEngine
from falcon_gpu.sources.nvml.source import NvmlSource

POLICIES = [
    {"name": "hot", "temperature_above": 85, "for": 60},
    {"name": "power", "power_above": 650},
    {"name": "ecc", "ecc_uncorrected": True},
    {"name": "xid", "xid": [48, 79]},
    {"name": "pages", "retired_pages_above": 10},
    {"name": "replays", "pcie_replays_per_minute_above": 100},
    {"name": "remap", "remapped_rows_failed": True},
    {"name": "health", "health_fail": ["thermal", "lost"]},
]


def measure(gpus: int, procs: int, cycles: int) -> tuple[float, float, float]:
    path = write_scenario(gpus, procs)
    runner = make_runner(path, io.StringIO())
    runner.run()
    whole = []
    for _ in range(cycles):
        t0 = time.process_time()
        runner.run()
        whole.append(time.process_time() - t0)
    telemetry = Telemetry()
    source = NvmlSource(load_nvml(load_scenario(path)), telemetry)
    health = HealthEvaluator()
    engine = PolicyEngine([PolicyConfig.model_validate(p) for p in POLICIES], node="bench")
    with tempfile.TemporaryDirectory() as d:
        tracker = JobTracker("bench", JobLog(Path(d)), StateFile(Path(d)), telemetry)
        pol, jobs = [], []
        for c in range(cycles + 1):
            snap = source.collect(1_700_000_000.0 + 30 * c)
            reports = health.evaluate(snap)
            pods = tuple(
                PodUsage(
                    ContainerRef("ml", f"pod-{d.index}-{k}", "main"),
                    d.uuid,
                    allocated=True,
                    memory_used_bytes=1 << 30,
                    utilization_ratio=0.2,
                    processes=1,
                    energy_joules_total=10.0 * c,
                )
                for d in snap.devices
                for k in range(4)
            )
            att = Attribution(pods=pods, sources_ok={"cgroup": True, "kubelet": True, "logs": True})
            t0 = time.process_time()
            engine.evaluate(snap, reports, att)
            t1 = time.process_time()
            tracker.observe(snap, att, reports)
            t2 = time.process_time()
            if c:  # the first cycle opens every job
                pol.append(t1 - t0)
                jobs.append(t2 - t1)
    return median_ms(whole), median_ms(pol), median_ms(jobs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=300)
    a = ap.parse_args()
    print("| node | whole cycle, median CPU ms | 8 policies, ms | job tracker (4 jobs a GPU), ms |")
    print("|---|---|---|---|")
    for gpus, procs in ((8, 64), (16, 256)):
        whole, pol, jobs = measure(gpus, procs, a.cycles)
        print(f"| {gpus} GPUs x {procs} processes | {whole:.2f} | {pol:.3f} | {jobs:.3f} |")


if __name__ == "__main__":
    main()
