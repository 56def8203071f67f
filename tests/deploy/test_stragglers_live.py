"""Stragglers across nodes, live: four agents, one 16-GPU job, the shipped straggler rules.

Four real ``falcon-gpu run --simulate`` agents (scenarios written here) remote_write into a
Prometheus that evaluates ``conf/prometheus/stragglers.yml`` every second. Each node holds one pod
of the Kubeflow job ``ml/llama`` on four GPUs (its job label comes from the simulator's API server,
with no ``pod_labels`` setting) and one GPU of Slurm job 4242 whose process computes nothing.
Nodes 0 and 1 have GPM (H100: SM activity 95 %, NVML utilisation 100 %), nodes 2 and 3 not
(A100: utilisation 95 %); GPU 1 of node 2 runs at 40 %.

The rules' `for` (5 and 10 minutes) is cut to a second here and nothing else is changed: the time
logic itself is checked by promtool (conf/prometheus/tests/stragglers_test.yml). What this proves
is the wiring: the job label reaching the series, the join of device readings to jobs across
nodes, and the alerts' labels. Then node 2's agent restarts with that GPU at 95 %: it caught up,
and the alert clears.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.delivery.conftest import ManagedServer, wait_until
from tests.deploy.live import RULES, query, start_prometheus, stop, values

pytestmark = pytest.mark.servers

NODES = 4
JOB_GPUS = 4  # per node: 16 in all
SLOW = (2, 1)  # node, GPU
SLURM_JOB = "4242"


def uuid(node: int, gpu: int) -> str:
    return f"GPU-5a000000-0000-4000-8000-0000000{node:02d}{gpu:03d}"


def gpu(node: int, index: int, busy: float) -> dict[str, Any]:
    """An H100 with GPM on nodes 0 and 1 (NVML's utilisation 100 % whenever busy: it counts time,
    not SMs), an A100 without it on 2 and 3."""
    out: dict[str, Any] = {
        "uuid": uuid(node, index),
        "memory_total_bytes": 85520809984,
        "memory_used_bytes": 6e10 if busy else 2e9,
        "power_watts": 100 + 600 * busy,
        "processes": [],
    }
    if node < 2:
        out |= {
            "name": "NVIDIA H100 80GB HBM3",
            "utilization_gpu_percent": 100 if busy else 0,
            "utilization_memory_percent": 90 if busy else 0,
            "gpm": {"sm_active_percent": 100 * busy, "dram_active_percent": 60 * busy},
        }
    else:
        out |= {
            "name": "NVIDIA A100-SXM4-80GB",
            "utilization_gpu_percent": 100 * busy,
            "utilization_memory_percent": 60 * busy,
        }
    return out


def scenario(node: int, slow: float) -> dict[str, Any]:
    """GPUs 0-3: this node's worker pod of ml/llama; GPU 4: an idle process of Slurm job 4242."""
    gpus = [gpu(node, g, slow if (node, g) == SLOW else 0.95) for g in range(JOB_GPUS)]
    idle = gpu(node, JOB_GPUS, 0.0)
    pid = 5000 + node
    idle["processes"] = [
        {"pid": pid, "name": "python", "type": "compute", "used_memory_bytes": 2e9, "sm_util_percent": 0}
    ]
    pod, uids = f"llama-worker-{node}", f"00000000-0000-4000-8000-00000000000{node}"
    job_gpus = [g["uuid"] for g in gpus]
    host = {
        "proc": {str(pid): {"cgroup": f"0::/slurm/uid_1000/job_{SLURM_JOB}/step_0/task_0\n", "uid": 1000}},
        "users": [{"name": "alice", "uid": 1000}],
        "pod_resources": [
            {
                "namespace": "ml",
                "name": pod,
                "containers": [
                    {
                        "name": "trainer",
                        "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": job_gpus}],
                    }
                ],
            }
        ],
        "api_pods": [
            {
                "namespace": "ml",
                "name": pod,
                "uid": uids,
                "labels": {
                    "training.kubeflow.org/job-name": "llama",
                    "training.kubeflow.org/replica-type": "worker",
                },
                "containers": [{"name": "trainer", "limits": {"nvidia.com/gpu": str(JOB_GPUS)}}],
            }
        ],
    }
    return {"driver_version": "550.54.15", "cuda_version": "12.4", "gpus": [*gpus, idle], "host": host}


def short_rules(root: Path) -> Path:
    """The shipped straggler rules with every `for` cut to 1 s; nothing else touched."""
    doc = yaml.safe_load((RULES / "stragglers.yml").read_text())
    alerts = [r for g in doc["groups"] for r in g["rules"] if "alert" in r]
    assert {r["alert"]: r["for"] for r in alerts} == {
        "FalconGpuJobStraggler": "5m",
        "FalconGpuJobStalled": "10m",
    }
    for rule in alerts:
        rule["for"] = "1s"
    path = root / "stragglers-short.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@dataclass
class Fleet:
    root: Path
    store: ManagedServer
    agents: dict[int, subprocess.Popen[bytes]]

    def start(self, node: int, slow: float) -> None:
        name = f"node-{node}"
        (self.root / f"{name}.json").write_text(json.dumps(scenario(node, slow)))
        config = self.root / f"{name}.toml"
        config.write_text(
            f'node = "{name}"\ninterval = 1\nspool_dir = "{self.root / name / "spool"}"\n'
            f'[[sinks]]\ntype = "remote_write"\nurl = "{self.store.url}/api/v1/write"\n'
        )
        argv = [sys.executable, "-m", "falcon_gpu", "run", "--config", str(config)]
        with (self.root / f"{name}.log").open("ab") as log:
            self.agents[node] = subprocess.Popen(
                [*argv, "--simulate", str(self.root / f"{name}.json")], stdout=log, stderr=subprocess.STDOUT
            )

    def running(self) -> None:
        for node, proc in self.agents.items():
            if proc.poll() is not None:
                log = (self.root / f"node-{node}.log").read_text()[-3000:]
                raise AssertionError(f"agent node-{node} exited {proc.returncode}: {log}")

    def alerts(self, name: str) -> set[tuple[str, ...]]:
        """(state, node, gpu, namespace, job_name) of each ``name`` alert, pending ones too."""
        self.running()
        found = query(self.store, f'ALERTS{{alertname="{name}"}}')
        keys = ("alertstate", "node", "gpu", "namespace", "job_name")
        return {tuple(r["metric"].get(k, "") for k in keys) for r in found}


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    store = start_prometheus(tmp_path, "store", [], rule_files=(short_rules(tmp_path),))
    fleet = Fleet(tmp_path, store, {})
    try:
        for node in range(NODES):
            fleet.start(node, 0.40)
        yield fleet
    finally:
        for proc in fleet.agents.values():
            stop(proc)
        store.stop()


def test_the_slow_gpu_of_a_16_gpu_job_and_an_idle_slurm_job(fleet: Fleet) -> None:
    slow_node, slow_gpu = f"node-{SLOW[0]}", str(SLOW[1])
    straggler = ("firing", slow_node, slow_gpu, "ml", "llama")
    stalled = ("firing", "", "", "", SLURM_JOB)

    def both_fire() -> bool:
        return straggler in fleet.alerts("FalconGpuJobStraggler") and stalled in fleet.alerts(
            "FalconGpuJobStalled"
        )

    wait_until(both_fire, 60, "the straggler and the stalled alert firing")
    counts = values(query(fleet.store, "job:falcon_gpu_devices:count"), "namespace", "job_name")
    assert counts == {("ml", "llama"): 16.0, ("", SLURM_JOB): 4.0}
    # that GPU only, and the idle Slurm job is stalled, not a straggler (nor llama stalled)
    assert fleet.alerts("FalconGpuJobStraggler") == {straggler}
    assert fleet.alerts("FalconGpuJobStalled") == {stalled}
    # GPM's SM activity on nodes 0 and 1 (NVML says 100 % there), NVML's on 2 and 3: median 0.95
    ratios = values(
        query(fleet.store, 'gpu_job:falcon_gpu_sm_activity:ratio{job_name="llama"}'), "node", "gpu"
    )
    assert len(ratios) == 16
    assert all(math.isclose(v, 0.40 if k == (slow_node, slow_gpu) else 0.95) for k, v in ratios.items()), (
        ratios
    )
    of_median = values(query(fleet.store, "gpu_job:falcon_gpu_power:of_median"), "node", "gpu", "job_name")
    assert math.isclose(of_median[(slow_node, slow_gpu, "llama")], (100 + 600 * 0.40) / (100 + 600 * 0.95))
    # memory bandwidth: GPM's DRAM (57 %) where there is GPM, not NVML's 90 %; NVML's (57 %) elsewhere
    of_median = values(query(fleet.store, "gpu_job:falcon_gpu_memory_bandwidth:of_median"), "node", "gpu")
    assert math.isclose(of_median.pop((slow_node, slow_gpu)), 0.40 / 0.95)
    assert len(of_median) == 15 and all(math.isclose(v, 1.0) for v in of_median.values()), of_median

    # it catches up: node 2's agent comes back with that GPU at 95 %
    stop(fleet.agents[SLOW[0]])
    fleet.start(SLOW[0], 0.95)
    wait_until(lambda: not fleet.alerts("FalconGpuJobStraggler"), 30, "the straggler alert to clear")
    assert fleet.alerts("FalconGpuJobStalled") == {stalled}
