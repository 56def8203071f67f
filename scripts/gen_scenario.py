#!/usr/bin/env python3
"""Write a synthetic scenario (CONTRACT section 5) of N GPUs and P processes, for benchmarks.

Usage: scripts/gen_scenario.py --gpus 8 --processes 64 [--pods [--pod-count N]] [--profiling] > node.json
With ``--pods`` every process gets a pod cgroup, log files and a kubelet allocation (its own pod, or
one of ``--pod-count`` pods that share the processes round robin); with
``--profiling`` every GPU answers GPM and has PCIe counters and 18 NVLinks (an H100 SXM).
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid as uuidlib
from typing import Any

GPM = {
    "sm_active_percent": [60, 70], "sm_occupancy_percent": [40, 45], "tensor_active_percent": [20, 30],
    "dram_active_percent": [35, 40], "graphics_active_percent": [70, 80], "fp64_active_percent": 0,
    "fp32_active_percent": [30, 28], "fp16_active_percent": [12, 15],
}  # fmt: skip


def profiling(g: int, links: int = 18) -> dict[str, Any]:
    """GPM, PCIe and ``links`` NVLinks of one GPU (what issue 11 reads; 18: an H100 SXM)."""
    link = {
        "tx_bytes": [1e12 * g + i * 1e9 for i in range(5)],
        "rx_bytes": [2e12 * g + i * 1e9 for i in range(5)],
        "crc_flit_errors": 0, "crc_data_errors": 0, "replay_errors": 0, "recovery_errors": 0,
    }  # fmt: skip
    return {
        "gpm": GPM,
        "pcie": {
            "tx_bytes": [1e11 * g + i * 1e8 for i in range(5)],
            "rx_bytes": [2e11 * g + i * 1e8 for i in range(5)],
        },
        "nvlink": [{"link": n, **link} for n in range(links)],
    }


def scenario(
    gpus: int, processes: int, pods: bool, with_profiling: bool = False, links: int = 18, pod_count: int = 0
) -> dict[str, Any]:
    """``pod_count``: process ``p`` runs in pod ``p % pod_count`` (one container each); 0: a pod
    per process."""
    rnd = uuidlib.UUID(int=0x5EED)
    devices: list[dict[str, Any]] = []
    host: dict[str, Any] = {"proc": {}, "pod_resources": [], "log_containers": [], "log_pods": []}
    for g in range(gpus):
        guid = f"GPU-{uuidlib.UUID(int=rnd.int + g)}"
        devices.append(
            {
                "uuid": guid,
                "name": "NVIDIA H100 80GB HBM3",
                "pci_bus_id": f"00000000:{0x18 + g:02x}:00.0",
                "memory_total_bytes": 85520809984,
                "memory_used_bytes": [1e9 * (g + 1), 2e9 * (g + 1)],
                "memory_reserved_bytes": 0,
                "utilization_gpu_percent": [50 + g % 50, 60],
                "utilization_memory_percent": 30,
                "temperature_celsius": 60,
                "memory_temperature_celsius": 70,
                "power_watts": 350.5,
                "power_limit_watts": 700,
                "energy_joules": [1000 * g + i * 10.0 for i in range(5)],
                "performance_state": 0,
                "sm_clock_mhz": 1980,
                "memory_clock_mhz": 2619,
                "fan_speed_percent": 30,
                "encoder_percent": 0,
                "decoder_percent": 0,
                "pcie_replays": 0,
                "ecc": {
                    "corrected_volatile": 0,
                    "uncorrected_volatile": 0,
                    "corrected_aggregate": 0,
                    "uncorrected_aggregate": 0,
                },
                "retired_pages": {"single_bit": 0, "double_bit": 0, "pending": False},
                "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failed": False},
                "clock_event_reasons": [],
                "processes": [],
                **(profiling(g, links) if with_profiling else {}),
            }
        )
    for p in range(processes):
        g = p % gpus
        pid = 10000 + p
        devices[g]["processes"].append(
            {
                "pid": pid,
                "name": "python",
                "type": "compute",
                "used_memory_bytes": 1 << 30,
                "sm_util_percent": 100 // max(1, processes // gpus),
            }
        )
        if pods:
            k = p % pod_count if pod_count else p
            puid = str(uuidlib.UUID(int=rnd.int + 1000 + k))
            cid = f"{k:064x}"
            pod, ns = f"job-{k}", "bench"
            host["proc"][str(pid)] = {
                "cgroup": "0::/kubepods.slice/kubepods-burstable.slice/"
                f"kubepods-burstable-pod{puid.replace('-', '_')}.slice/cri-containerd-{cid}.scope\n"
            }
            device_id = f"{devices[g]['uuid']}::{p}"
            if k < len(host["log_pods"]):  # the pod has a process already: one more allocated slice
                host["pod_resources"][k]["containers"][0]["devices"][0]["device_ids"].append(device_id)
                continue
            host["log_containers"].append(f"{pod}_{ns}_main-{cid}.log")
            host["log_pods"].append(f"{ns}_{pod}_{puid}")
            host["pod_resources"].append(
                {
                    "namespace": ns,
                    "name": pod,
                    "containers": [
                        {
                            "name": "main",
                            "devices": [
                                {"resource_name": "nvidia.com/gpu.shared", "device_ids": [device_id]}
                            ],
                        }
                    ],
                }
            )
    out: dict[str, Any] = {"driver_version": "550.54.15", "cuda_version": "12.4", "gpus": devices}
    if pods:
        out["host"] = host
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--processes", type=int, default=64)
    ap.add_argument("--pods", action="store_true")
    ap.add_argument("--profiling", action="store_true")
    ap.add_argument("--pod-count", type=int, default=0, help="with --pods: this many pods share them")
    a = ap.parse_args()
    json.dump(scenario(a.gpus, a.processes, a.pods, a.profiling, pod_count=a.pod_count), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
