"""Energy and carbon per team, live: the real agent (``--simulate job-node``: a training pod that
ends after four cycles and a serving pod that keeps running) writes to a real Prometheus with the
shipped rules loaded; the rules' kWh per namespace must equal the sum of the agent's own attributed
energy counters of its pods, the emissions that energy times the node's ``carbon_intensity``, and
the training pod's job record must carry its energy times the intensity."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.delivery.conftest import wait_until
from tests.deploy.live import ROOT, query, start_prometheus, stop, values

pytestmark = pytest.mark.servers

INTENSITY = 400.0


def test_namespace_energy_and_emissions_add_up_to_the_agents_counters(tmp_path: Path) -> None:
    store = start_prometheus(tmp_path, "store", [])
    jobs = Path(os.environ["FALCON_GPU_JOBS_DIR"])  # tests/conftest.py: each test its own
    config = tmp_path / "agent.toml"
    config.write_text(
        f'node = "carbon-node"\ninterval = 1\nspool_dir = "{tmp_path / "spool"}"\n'
        f"carbon_intensity = {INTENSITY:g}\n"
        f'[[sinks]]\ntype = "remote_write"\nurl = "{store.url}/api/v1/write"\n'
    )
    log = (tmp_path / "agent.log").open("ab")
    agent = subprocess.Popen(
        [sys.executable, "-m", "falcon_gpu", "run", "--config", str(config), "--simulate", "job-node"],
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
    )  # fmt: skip
    try:
        records = jobs / "jobs.jsonl"
        wait_until(lambda: records.exists() and records.read_text().strip() != "", 40, "the job record")
        time.sleep(2)  # the serving pod's energy grows on
    finally:
        stop(agent)
        log.close()
    try:
        time.sleep(3)  # every sample is in and the rules have evaluated over all of them
        last = "last_over_time(falcon_gpu_pod_energy_joules_total[1h])"
        counters = f"max by (namespace, pod, container, uuid) ({last})"
        joules = values(query(store, f"sum by (namespace) ({counters})"), "namespace")
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
