"""MPS (issue 13 item 4): MPS clients are attributed by their PIDs like any process. NVML lists
them in the MPS compute list (merged by PID with the compute and graphics lists), each with its
own used memory and its own utilisation samples; the MPS server is a process in no pod. Run
through the simulator's NVML library, the real NVML source and the real attributor."""

from __future__ import annotations

import json
from pathlib import Path

from tests.attribution.test_simulated_e2e import run_scenario

from .helpers import GIB, container_id, pod_uid, systemd_cgroup

GPU = "GPU-3c500000-0000-4000-8000-0000000000a1"


def mps_scenario(tmp_path: Path) -> Path:
    pods = [("ml", "infer-a", 1), ("ml", "infer-b", 2)]
    proc = {str(4000 + n): {"cgroup": systemd_cgroup(pod_uid(n), container_id(n))} for _, _, n in pods}
    proc["3999"] = {"cgroup": "0::/system.slice/nvidia-mps.service\n"}
    device = {"resource_name": "nvidia.com/gpu.shared", "device_ids": [f"{GPU}::{n}" for n in (0, 1)]}
    host = {
        "proc": proc,
        "pod_resources": [
            {"namespace": ns, "name": pod, "containers": [{"name": "main", "devices": [device]}]}
            for ns, pod, _ in pods
        ],
        "log_pods": [f"{ns}_{pod}_{pod_uid(n)}" for ns, pod, n in pods],
        "log_containers": [f"{pod}_{ns}_main-{container_id(n)}.log" for ns, pod, n in pods],
    }
    processes = [
        {"pid": 3999, "name": "nvidia-cuda-mps-server", "type": "compute", "used_memory_bytes": GIB // 4},
        {"pid": 4001, "name": "python", "type": "mps", "used_memory_bytes": 6 * GIB, "sm_util_percent": 40},
        {"pid": 4002, "name": "python", "type": "mps", "used_memory_bytes": 3 * GIB, "sm_util_percent": 20},
    ]
    gpu = {
        "uuid": GPU,
        "name": "NVIDIA H100 80GB HBM3",
        "memory_total_bytes": 80 * GIB,
        "memory_used_bytes": 10 * GIB,
        "energy_joules": [1000, 1600, 2200, 2800],
        "processes": processes,
    }
    path = tmp_path / "mps.json"
    path.write_text(
        json.dumps({"driver_version": "570.86.15", "cuda_version": "12.8", "gpus": [gpu], "host": host})
    )
    return path


def test_mps_clients_in_pods_get_their_own_memory_utilisation_and_energy(tmp_path: Path) -> None:
    for run in run_scenario(str(mps_scenario(tmp_path))):
        types = {p.pid: p.types for p in run.snapshots[-1].devices[0].processes}
        assert types == {3999: ("compute",), 4001: ("mps",), 4002: ("mps",)}
        result = run.results[-1]
        pods = {p.container.pod: (p.memory_used_bytes, p.utilization_ratio, p.processes) for p in result.pods}
        assert pods == {"infer-a": (6 * GIB, 0.4, 1), "infer-b": (3 * GIB, 0.2, 1)}
        (rest,) = result.unattributed
        assert (rest.memory_used_bytes, rest.processes) == (1 * GIB, 1)  # 10 - 6 - 3: server + context
        energy = {p.container.pod: p.energy_joules_total for p in result.pods}
        assert energy["infer-a"] == 2 * energy["infer-b"]  # shared by SM share, 40 : 20
        assert sum(energy.values()) + (rest.energy_joules_total or 0) == 1800  # 2800 - 1000
