"""Scenarios the advice tests write: H100 80GB GPUs, one pod per GPU at a time, cycle by cycle.

``Node.pod`` adds a Kubernetes pod whose one process runs on a GPU from ``start`` to ``until``
(cycles) with the given memory (GiB) and SM (percent) per cycle. The node also has one H100 in
MIG mode with no instances, the GPU NVML reads the model's MIG profiles from.
"""

from __future__ import annotations

import json
import uuid as uuidlib
from pathlib import Path
from typing import Any

GIB = 1 << 30
MODEL = "NVIDIA H100 80GB HBM3"
TOTAL = 85520809984


def _gpu(index: int, *, mig: bool = False) -> dict[str, Any]:
    gpu: dict[str, Any] = {
        "uuid": f"GPU-{index:08x}-0000-4000-8000-00000000a{index:03d}",
        "name": MODEL,
        "pci_bus_id": f"00000000:{0x18 + index:02X}:00.0",
        "memory_total_bytes": TOTAL,
        "memory_used_bytes": 1 * GIB,
        "utilization_gpu_percent": 10,
        "power_watts": 300.0,
        "processes": [],
    }
    if mig:
        gpu["mig_mode"] = 1
    return gpu


class Node:
    def __init__(self, gpus: int) -> None:
        self.gpus = [_gpu(i) for i in range(gpus)] + [_gpu(gpus, mig=True)]
        self.host: dict[str, Any] = {"proc": {}, "pod_resources": [], "log_containers": [], "log_pods": [],
                                     "api_pods": []}  # fmt: skip
        self._pid = 7000

    def _process(self, gpu: int, memory_gib: list[float], sm_percent: list[float], start: int) -> int:
        """A new process on GPU ``gpu`` from cycle ``start``, one memory and SM value per cycle."""
        self._pid += 1
        self.gpus[gpu]["processes"].append(
            {
                "pid": self._pid,
                "name": "python",
                "type": "compute",
                "from_cycle": start,
                "until_cycle": start + len(memory_gib),
                "used_memory_bytes": [round(m * GIB) for m in memory_gib],
                "sm_util_percent": sm_percent,
            }
        )
        return self._pid

    def slurm_job(
        self,
        gpu: int,
        job: int,
        name: str | None,
        memory_gib: list[float],
        sm_percent: list[float],
        *,
        start: int,
    ) -> None:
        """A Slurm job's one task (cgroup v2, step 0) on GPU ``gpu``; ``name`` in its environment as
        ``SLURM_JOB_NAME`` (None: no environ file, as for a process the agent may not read)."""
        pid = self._process(gpu, memory_gib, sm_percent, start)
        proc: dict[str, Any] = {"cgroup": f"0::/system.slice/slurmstepd.scope/job_{job}/step_0/user/task_0\n",
                                "uid": 1000}  # fmt: skip
        if name is not None:
            proc["environ"] = {"SLURM_JOB_ID": str(job), "SLURM_JOB_NAME": name, "PATH": "/usr/bin"}
        self.host["proc"][str(pid)] = proc

    def pod(
        self,
        gpu: int,
        name: str,
        memory_gib: list[float],
        sm_percent: list[float],
        *,
        start: int = 0,
        owner: dict[str, str] | None = None,
        namespace: str = "ml",
        container: str = "main",
    ) -> None:
        self._process(gpu, memory_gib, sm_percent, start)
        pod_uid = str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f"{namespace}/{name}"))
        cid = uuidlib.uuid5(uuidlib.NAMESPACE_URL, name).hex * 2
        dev = self.gpus[gpu]
        slice_uid = pod_uid.replace("-", "_")
        self.host["proc"][str(self._pid)] = {
            "cgroup": f"0::/kubepods.slice/kubepods-pod{slice_uid}.slice/cri-containerd-{cid}.scope\n"
        }
        self.host["pod_resources"].append(
            {
                "namespace": namespace,
                "name": name,
                "containers": [
                    {
                        "name": container,
                        "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": [dev["uuid"]]}],
                    }
                ],
            }
        )
        self.host["log_containers"].append(f"{name}_{namespace}_{container}-{cid}.log")
        self.host["log_pods"].append(f"{namespace}_{name}_{pod_uid}")
        api: dict[str, Any] = {"namespace": namespace, "name": name, "uid": pod_uid, "labels": {"app": name},
                               "containers": [{"name": container}]}  # fmt: skip
        if owner:
            api["owner"] = owner
        self.host["api_pods"].append(api)

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps({"driver_version": "550.54.15", "cuda_version": "12.4",
                                    "gpus": self.gpus, "host": self.host}, indent=1))  # fmt: skip
        return path
