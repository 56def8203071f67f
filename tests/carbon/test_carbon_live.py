"""Energy and carbon per team, live: the real agent writes to a real Prometheus with the shipped
rules loaded, and the rules must add up to the agent's own attributed energy counters.

``--simulate job-node`` (a training pod that ends after four cycles and a serving pod that keeps
running): the kWh per namespace equals the sum of its pods' counters, the emissions that energy
times the node's ``carbon_intensity``, and the training pod's job record carries its energy times
the intensity. A scenario written here (one controller's three pods, one of them the restart of
another under a new name, and a bare pod beside them): the kWh per workload equals the sum of its
pods' counters, the workload read from the simulator's API server (``ownerReferences``)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.advice.scenario import Node
from tests.delivery.conftest import ManagedServer, wait_until
from tests.deploy.live import ROOT, query, start_prometheus, stop, values

pytestmark = pytest.mark.servers

INTENSITY = 400.0
COUNTERS = "max by (namespace, pod, container, uuid) (last_over_time(falcon_gpu_pod_energy_joules_total[1h]))"
"""The agent's own attributed energy, each counter's last value (all are younger than the hour)."""


def run_agent(tmp_path: Path, store: ManagedServer, simulate: str, done: Callable[[], bool]) -> None:
    """The real agent (``carbon_intensity`` set) remote-writing to ``store`` until ``done``, then
    stopped, and the rules given time to evaluate over all of its samples."""
    config = tmp_path / "agent.toml"
    config.write_text(
        f'node = "carbon-node"\ninterval = 1\nspool_dir = "{tmp_path / "spool"}"\n'
        f"carbon_intensity = {INTENSITY:g}\n"
        f'[[sinks]]\ntype = "remote_write"\nurl = "{store.url}/api/v1/write"\n'
    )
    log = (tmp_path / "agent.log").open("ab")
    agent = subprocess.Popen(
        [sys.executable, "-m", "falcon_gpu", "run", "--config", str(config), "--simulate", simulate],
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
    )  # fmt: skip
    try:
        wait_until(done, 40, "the scenario's cycles")
        time.sleep(2)  # the running pods' energy grows on
    finally:
        stop(agent)
        log.close()
    time.sleep(3)  # every sample is in and the rules have evaluated over all of them


def test_namespace_energy_and_emissions_add_up_to_the_agents_counters(tmp_path: Path) -> None:
    store = start_prometheus(tmp_path, "store", [])
    records = Path(os.environ["FALCON_GPU_JOBS_DIR"]) / "jobs.jsonl"  # tests/conftest.py: each test its own
    try:
        run_agent(tmp_path, store, "job-node", lambda: records.exists() and records.read_text().strip() != "")
        joules = values(query(store, f"sum by (namespace) ({COUNTERS})"), "namespace")
        kwh = values(query(store, "namespace:falcon_gpu_energy_kwh:1h"), "namespace")
        grams = values(query(store, "namespace:falcon_gpu_emissions_grams:1h"), "namespace")
        pods = values(query(store, "namespace_pod:falcon_gpu_energy_kwh:1h"), "namespace", "pod")
    finally:
        store.stop()
    assert kwh.keys() == joules.keys() == grams.keys() == {("ml",), ("serving",)}, (kwh, grams)
    assert all(j > 0 for j in joules.values())
    for ns, total in joules.items():
        assert math.isclose(kwh[ns], total / 3.6e6, rel_tol=1e-9), (ns, kwh[ns], total)
        assert math.isclose(grams[ns], kwh[ns] * INTENSITY, rel_tol=1e-9)
        assert math.isclose(kwh[ns], sum(v for k, v in pods.items() if k[0] == ns[0]), rel_tol=1e-9)

    (record,) = [json.loads(line) for line in records.read_text().splitlines()]
    assert record["pod"] == "train-job-0" and record["energy_joules"] > 0
    assert record["emissions_grams"] == round(record["energy_joules"] / 3.6e6 * INTENSITY, 3)


OWNER = {"kind": "ReplicaSet", "name": "trainer-7d4f8b9c5"}
"""Deployment ``trainer``'s ReplicaSet: its pods' names (``trainer-a``...) are ones the name rule
alone would not group, so only the owner read from the API server makes them one workload."""


def test_a_workloads_energy_is_the_sum_of_its_pods_a_restarted_one_included(tmp_path: Path) -> None:
    node = Node(gpus=2)
    node.pod(0, "trainer-a", [20.0] * 5, [60] * 5, start=1, owner=OWNER)  # ends after five cycles,
    node.pod(0, "trainer-c", [20.0] * 60, [60] * 60, start=7, owner=OWNER)  # restarted as trainer-c
    node.pod(1, "trainer-b", [20.0] * 60, [40] * 60, start=1, owner=OWNER)
    node.pod(1, "loader-q", [4.0] * 60, [20] * 60, start=1)  # a bare pod sharing GPU 1: its own workload
    for gpu in node.gpus[:2]:
        gpu["energy_joules"] = [300.0 * cycle for cycle in range(90)]  # 300 W, shared out by SM share
    scenario = node.write(tmp_path / "scenario.json")
    store = start_prometheus(tmp_path, "store", [])
    grown = 'falcon_gpu_pod_energy_joules_total{pod="trainer-c"} > 0'
    try:
        run_agent(tmp_path, store, str(scenario), lambda: bool(query(store, grown)))
        joules = values(query(store, COUNTERS), "namespace", "pod")
        per_workload = ("namespace", "workload")
        kwh = values(query(store, "namespace_workload:falcon_gpu_energy_kwh:1h"), *per_workload)
        grams = values(query(store, "namespace_workload:falcon_gpu_emissions_grams:1h"), *per_workload)
        pods = values(query(store, "namespace_pod:falcon_gpu_energy_kwh:1h"), "namespace", "pod")
    finally:
        store.stop()
    workloads = {
        ("ml", "trainer"): ("trainer-a", "trainer-b", "trainer-c"),
        ("ml", "loader-q"): ("loader-q",),
    }
    assert kwh.keys() == grams.keys() == workloads.keys(), (kwh, joules)
    for key, members in workloads.items():
        counted = [joules[("ml", pod)] for pod in members]
        assert all(j > 0 for j in counted), (key, joules)
        assert math.isclose(kwh[key], sum(counted) / 3.6e6, rel_tol=1e-9), (key, kwh[key], counted)
        assert math.isclose(kwh[key], sum(pods[("ml", pod)] for pod in members), rel_tol=1e-9)
        assert math.isclose(grams[key], kwh[key] * INTENSITY, rel_tol=1e-9)
