"""Benchmark: one NVML source cycle on a simulated node (no GPU needed).

Builds an N-GPU scenario (processes on every GPU, MIG on every other one), runs
``NvmlSource.collect`` for a number of cycles and prints the time per cycle and
the NVML calls per GPU per cycle. The simulator is pure Python, so this measures
the source's own overhead (readers, caches, telemetry), not the driver's.

    python scripts/bench_nvml_source.py --gpus 8 --processes 16 --cycles 300
"""

from __future__ import annotations

import argparse
import statistics
import time

from falcon_gpu.simulator.library import SimulatedNvml
from falcon_gpu.simulator.scenario import parse_scenario
from falcon_gpu.sources.nvml.source import NvmlSource
from falcon_gpu.telemetry import Telemetry

GIB = 1 << 30


def scenario(gpus: int, processes: int) -> dict[str, object]:
    out = []
    for i in range(gpus):
        procs = [
            {
                "pid": 10_000 * (i + 1) + p,
                "name": "python",
                "used_memory_bytes": [GIB, 2 * GIB],
                "sm_util_percent": [5, 9],
            }
            for p in range(processes)
        ]
        gpu: dict[str, object] = {
            "uuid": f"GPU-{i:08d}-0000-0000-0000-000000000000",
            "name": "NVIDIA H100 80GB HBM3",
            "pci_bus_id": f"00000000:{i + 16:02X}:00.0",
            "memory_total_bytes": 80 * GIB,
            "memory_used_bytes": [20 * GIB, 21 * GIB],
            "memory_reserved_bytes": GIB // 2,
            "utilization_gpu_percent": [50, 60],
            "utilization_memory_percent": 30,
            "temperature_celsius": 60,
            "memory_temperature_celsius": 70,
            "power_watts": [300, 310],
            "power_limit_watts": 700,
            "energy_joules": [1000, 1300],
            "performance_state": 0,
            "sm_clock_mhz": 1980,
            "memory_clock_mhz": 2619,
            "encoder_percent": 0,
            "decoder_percent": 0,
            "pcie_replays": 0,
            "ecc": {
                "corrected_volatile": 0,
                "uncorrected_volatile": 0,
                "corrected_aggregate": 0,
                "uncorrected_aggregate": 0,
            },
            "remapped_rows": {"correctable": 0, "uncorrectable": 0},
            "clock_event_reasons": [],
            "not_supported": ["fan_speed_percent", "retired_pages"],
            "processes": procs,
        }
        if i % 2:
            gpu["mig"] = [
                {
                    "gpu_instance_id": g,
                    "profile": "1g.10gb",
                    "uuid": f"MIG-{i:04d}{g:04d}-0000-0000-0000-000000000000",
                    "memory_total_bytes": 10 * GIB,
                    "memory_used_bytes": GIB,
                }
                for g in range(3)
            ]
        out.append(gpu)
    return {"gpus": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--cycles", type=int, default=300)
    args = parser.parse_args()
    sim = SimulatedNvml(parse_scenario(scenario(args.gpus, args.processes)))
    source = NvmlSource(sim, Telemetry())
    source.collect(time.time())  # the first cycle probes variants and learns NOT_SUPPORTED
    before = sum(sim.calls.values())
    took = []
    for _ in range(args.cycles):
        start = time.perf_counter()
        snap = source.collect(time.time())
        took.append(time.perf_counter() - start)
    assert snap.nvml_ok and len(snap.devices) == args.gpus
    calls = (sum(sim.calls.values()) - before) / args.cycles / args.gpus
    took.sort()
    p99 = took[int(len(took) * 0.99) - 1]
    print(
        f"{args.gpus} GPUs x {args.processes} processes, {args.cycles} cycles: "
        f"median {statistics.median(took) * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms per cycle; "
        f"{calls:.1f} NVML calls per GPU per cycle"
    )


if __name__ == "__main__":
    main()
