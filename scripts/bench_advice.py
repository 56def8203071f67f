#!/usr/bin/env python3
"""What right-sizing advice costs the running agent: one computation of the advice book (every
10 cycles, or when a job ends) at a typical node's size and at the book's bounds.

Records are synthetic (an H100 80GB node, MIG profiles as NVML describes them), each workload with
the records the book keeps per workload. Every other cycle only hands the previous advice out again.
Usage: python scripts/bench_advice.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import time

from falcon_gpu.advice.book import EVERY, MAX_WORKLOADS, PER_WORKLOAD, AdviceBook
from falcon_gpu.advice.profiles import MigProfile
from falcon_gpu.model.jobs import JobRecord
from falcon_gpu.model.snapshot import DeviceReading, Snapshot

MODEL = "NVIDIA H100 80GB HBM3"
PROFILES = {
    MODEL: tuple(
        MigProfile(i, name, slices, mib << 20, sms, n)
        for i, name, slices, mib, sms, n in (
            (0, "1g.10gb", 1, 9984, 16, 7),
            (9, "1g.20gb", 1, 20096, 26, 4),
            (1, "2g.20gb", 2, 20096, 32, 3),
            (2, "3g.40gb", 3, 40448, 60, 2),
            (3, "4g.40gb", 4, 40448, 64, 1),
            (4, "7g.80gb", 7, 81152, 132, 1),
        )
    )
}


def records(workloads: int, per: int) -> list[JobRecord]:
    return [
        JobRecord(
            namespace="ml",
            pod=f"w{w}-{j}",
            container="main",
            node="n",
            gpu_index=w % 8,
            gpu_uuid=f"GPU-{w % 8}",
            gpu_model=MODEL,
            start=1000.0 + j * 100,
            end=1090.0 + j * 100,
            energy_joules=1.0,
            memory_max_bytes=(w % 70 + 1) << 30,
            memory_mean_bytes=1 << 30,
            cycles=10,
            utilization_max_ratio=0.4,
            sm_active_p95_ratio=(w % 9) / 10,
            memory_p95_bytes=(w % 70 + 1) << 29,
            workload=f"w{w}",
        )
        for w in range(workloads)
        for j in range(per)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    snapshot = Snapshot(
        timestamp=1e6,
        nvml_ok=True,
        devices=tuple(
            DeviceReading(index=i, uuid=f"GPU-{i}", name=MODEL, pci_bus_id="", memory_total_bytes=80 << 30)
            for i in range(8)
        ),
    )
    print("| workloads x records kept | ms per computation | ms per cycle (1 in", EVERY, ") |")
    for workloads, per in ((32, 4), (64, PER_WORKLOAD), (MAX_WORKLOADS, PER_WORKLOAD)):
        book = AdviceBook(recent=records(workloads, per), window=1e9, every=1)
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            book.observe(snapshot, (), list, lambda _s: PROFILES)
            times.append(time.perf_counter() - t)
        ms = sorted(times)[len(times) // 2] * 1000
        print(f"| {workloads} x {per} | {ms:.2f} | {ms / EVERY:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
