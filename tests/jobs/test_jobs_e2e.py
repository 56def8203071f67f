"""The real agent on the ``job-node`` scenario: a training pod runs for cycles 0-3 and leaves.

Its record must add up against what the agent itself reported each cycle (the
pod energy counter, the scenario's memory peak), reach the real Pushgateway as
the pod's group, come out of the Open-Falcon output of the cycle that ended the
job, print in ``falcon-gpu stats``, and be one record across an agent restart.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.simulator.scenario.parse import resolve_scenario
from tests.delivery.conftest import ManagedServer, http_get, wait_until

ROOT = Path(__file__).resolve().parents[2]
POD = {"namespace": "ml", "pod": "train-job-0", "container": "trainer"}
pytestmark = pytest.mark.servers


@pytest.fixture(scope="module")
def gpu0() -> dict[str, Any]:
    return dict(json.loads(resolve_scenario("job-node").read_text())["gpus"][0])


def start_agent(tmp_path: Path, sinks: list[dict[str, Any]], out: Path) -> subprocess.Popen[bytes]:
    lines = ['node = "job-node"', "interval = 1", f'spool_dir = "{tmp_path / "spool"}"']
    for sink in sinks:
        lines += ["[[sinks]]", *(f"{k} = {json.dumps(v)}" for k, v in sink.items())]
    cfg = tmp_path / "falcon-gpu.toml"
    cfg.write_text("\n".join(lines) + "\n")
    argv = [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "job-node", "--config", str(cfg)]
    with out.open("ab") as fh, (tmp_path / "agent.log").open("ab") as err:
        return subprocess.Popen(argv, stdout=fh, stderr=err, cwd=ROOT)


def stop(agent: subprocess.Popen[bytes], tmp_path: Path) -> None:
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(60) == 0, (tmp_path / "agent.log").read_text()[-3000:]


def job_records(jobs_dir: Path) -> list[dict[str, Any]]:
    path = jobs_dir / "jobs.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [r for r in map(json.loads, lines) if r["pod"] == POD["pod"]]


def sample(cycle: dict[str, Any], name: str) -> float | None:
    for s in cycle["samples"]:
        if s["name"] == name and all(s["labels"].get(k) == v for k, v in POD.items()):
            return float(s["value"])
    return None


def pushgateway_job_series(server: ManagedServer) -> dict[str, float]:
    """``falcon_gpu_job_record_*`` of the trainer in the pod's group, by metric name."""
    out = {}
    for line in http_get(server.url + "/metrics").decode().splitlines():
        if line.startswith("falcon_gpu_job_record_") and 'pod="train-job-0"' in line:
            assert (
                'job="falcon_gpu_job"' in line and 'namespace="ml"' in line and 'container="trainer"' in line
            )
            name, value = line.rsplit(" ", 1)
            out[name.split("{", 1)[0]] = float(value)
    return out


def test_a_finished_job_adds_up_and_reaches_every_output(
    tmp_path: Path, pushgateway: ManagedServer, gpu0: dict[str, Any]
) -> None:
    jobs_dir = Path(os.environ["FALCON_GPU_JOBS_DIR"])
    out = tmp_path / "stdout"
    sinks = [
        {"type": "stdout", "name": "json", "format": "json"},
        {"type": "stdout", "name": "falcon", "format": "falcon"},
        {"type": "pushgateway", "url": pushgateway.url, "retry_max_delay": 0.5},
    ]
    agent = start_agent(tmp_path, sinks, out)
    try:
        wait_until(lambda: bool(job_records(jobs_dir)), 60, "the trainer's job record")
        wait_until(lambda: bool(pushgateway_job_series(pushgateway)), 20, "the job group in the Pushgateway")
    finally:
        stop(agent, tmp_path)
    (rec,) = job_records(jobs_dir)
    cycles = [json.loads(x) for x in out.read_text().splitlines() if x.startswith("{")]
    falcon = [json.loads(x) for x in out.read_text().splitlines() if x.startswith("[")]
    running = [i for i, c in enumerate(cycles) if sample(c, "falcon_gpu_pod_processes") == 1]
    # the process runs in cycles 0-3; the first cycle or two can come before the first kubelet answer
    assert running == list(range(running[0], 4)) and running[0] <= 2, running
    first, last = running[0], running[-1]
    energy = [sample(c, "falcon_gpu_pod_energy_joules_total") or 0.0 for c in cycles]

    # energy: the increments of the agent's own pod counter over the job's cycles ...
    before = energy[first - 1] if first > 0 else 0.0
    assert rec["energy_joules"] == pytest.approx(energy[last] - before, abs=1e-6)
    # ... which is the scenario's energy shared out by SM share (the trainer vs a 10 % host daemon)
    procs = gpu0["processes"]
    joules, sm = gpu0["energy_joules"], procs[0]["sm_util_percent"]
    shares = [
        (joules[k] - joules[k - 1]) * sm[k] / (sm[k] + procs[1]["sm_util_percent"]) for k in running if k > 0
    ]
    assert rec["energy_joules"] == pytest.approx(sum(shares), abs=1e-3)
    assert rec["memory_max_bytes"] == max(procs[0]["used_memory_bytes"]) == 30 << 30
    assert rec["cycles"] == len(running)
    assert rec["start"] == pytest.approx(cycles[first]["timestamp_ms"] / 1000, abs=1e-3)
    assert rec["end"] == pytest.approx(cycles[last]["timestamp_ms"] / 1000, abs=1e-3)
    assert rec["utilization_mean_ratio"] == pytest.approx(sum(sm[k] for k in running) / len(running) / 100)
    assert rec["throttled_seconds"]["sw_power_cap"] == pytest.approx(rec["duration_seconds"], abs=0.01)
    assert (rec["gpu_uuid"], rec["gpu_model"], rec["gpu_index"]) == (gpu0["uuid"], gpu0["name"], 0)

    # Open-Falcon: Job* items in exactly the cycle that saw the job gone (cycle 4)
    with_jobs = [i for i, items in enumerate(falcon) if any(x["metric"].startswith("Job") for x in items)]
    assert with_jobs == [last + 1]
    items = {x["metric"]: x for x in falcon[last + 1] if x["metric"].startswith("Job")}
    assert {m: x["value"] for m, x in items.items()} == {
        "JobEnergy": round(rec["energy_joules"], 4),
        "JobDuration": rec["duration_seconds"],
        "JobMaxFBUsed": 30720.0,
        "JobAvgGPUUtils": round(rec["utilization_mean_ratio"] * 100, 4),
    }
    assert items["JobEnergy"]["tags"] == "GpuId=0,namespace=ml,pod=train-job-0,container=trainer"
    assert items["JobEnergy"]["timestamp"] == cycles[last + 1]["timestamp_ms"] // 1000

    # the Pushgateway: the pod's group holds the record's values
    assert pushgateway_job_series(pushgateway) == {
        "falcon_gpu_job_record_energy_joules": pytest.approx(rec["energy_joules"]),
        "falcon_gpu_job_record_duration_seconds": pytest.approx(rec["duration_seconds"]),
        "falcon_gpu_job_record_max_memory_bytes": 30 << 30,
        "falcon_gpu_job_record_mean_utilization_ratio": pytest.approx(rec["utilization_mean_ratio"]),
        "falcon_gpu_job_record_end_timestamp_seconds": pytest.approx(rec["end"]),
    }

    # falcon-gpu stats prints it (newest first; the serving pod is still running: no record)
    shown = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "stats", "--namespace", "ml", "--since", "1h"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    _, row = shown.stdout.splitlines()
    assert row.split()[1:9] == [
        "ml",
        "train-job-0",
        "trainer",
        "0",
        "0m0" + str(round(rec["duration_seconds"])) + "s",
        f"{rec['energy_joules']:.1f}",
        "-",  # CO2E_G: no carbon_intensity
        "30720",
    ]
    nothing = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "stats", "--pod", "serve-0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert nothing.stdout.startswith("no job records matching")


def test_a_job_spanning_an_agent_restart_is_one_record(tmp_path: Path) -> None:
    jobs_dir = Path(os.environ["FALCON_GPU_JOBS_DIR"])
    state = jobs_dir / "open-jobs.json"

    def saved_trainer() -> dict[str, Any] | None:
        try:
            jobs = json.loads(state.read_text())["open"]
        except (OSError, ValueError):
            return None
        return next((j for j in jobs if j["key"][2] == "trainer"), None)

    sinks = [{"type": "stdout", "name": "json", "format": "json"}]
    agent = start_agent(tmp_path, sinks, tmp_path / "run1")
    try:
        wait_until(lambda: saved_trainer() is not None, 60, "the trainer's job saved as open")
    finally:
        stop(agent, tmp_path)
    first_run = saved_trainer()
    assert first_run is not None and job_records(jobs_dir) == [], "stopped while the job ran"
    agent = start_agent(tmp_path, sinks, tmp_path / "run2")  # the simulator starts again from cycle 0
    try:
        wait_until(lambda: bool(job_records(jobs_dir)), 60, "the trainer's job record")
    finally:
        stop(agent, tmp_path)
    (rec,) = job_records(jobs_dir)
    run2 = [json.loads(x) for x in (tmp_path / "run2").read_text().splitlines()]
    running2 = [c for c in run2 if sample(c, "falcon_gpu_pod_processes") == 1]
    assert rec["restarts"] == 1
    assert rec["start"] == first_run["start"], "the record starts in the first run"
    assert rec["end"] == pytest.approx(running2[-1]["timestamp_ms"] / 1000, abs=1e-3)
    assert rec["cycles"] == first_run["cycles"] + len(running2)
    # energy: the first run's share plus the second run's counter (its ledger started at 0)
    assert rec["energy_joules"] == pytest.approx(
        first_run["energy_joules"] + (sample(running2[-1], "falcon_gpu_pod_energy_joules_total") or 0.0),
        abs=1e-6,
    )
    assert rec["memory_max_bytes"] == 30 << 30


def test_the_plugin_with_a_jobs_dir_continues_the_jobs_its_previous_run_saved() -> None:
    jobs_dir = Path(os.environ["FALCON_GPU_JOBS_DIR"])  # set: the plugin keeps records
    argv = [sys.executable, "-m", "falcon_gpu", "plugin", "--simulate", "job-node"]
    for _ in range(2):
        done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert done.returncode == 0 and json.loads(done.stdout), done.stderr
    saved = json.loads((jobs_dir / "open-jobs.json").read_text())["open"]
    assert sorted((j["key"][1], j["cycles"], j["restarts"]) for j in saved) == [
        ("serve-0", 2, 1),
        ("train-job-0", 2, 1),
    ]
