"""The advice series through a real Prometheus with the shipped rules.

The real agent (``falcon-gpu run --simulate``, job records on) runs the scenario of
test_advise_e2e.py and remote-writes to Prometheus, which evaluates conf/prometheus/*.yml every
second. Once every pod has finished, the series must carry the advice ``falcon-gpu advise``
gives, and the rules must count the workloads per placement and the GPUs freed.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.advice.test_advise_e2e import _node
from tests.delivery.conftest import ManagedServer, wait_until
from tests.deploy.live import query, start_prometheus, stop, values

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.servers
WORKLOAD = ("namespace", "workload", "profile")
ADVICE = {"small": "1g.10gb", "big": "gpu", "busy": "3g.40gb", "trainer": "gpu"}
FINAL = {("ml", w, p) for w, p in ADVICE.items()}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedServer]:
    root = tmp_path_factory.mktemp("advice-live")
    scenario = _node().write(root / "scenario.json")
    prometheus = start_prometheus(root, "store", [])
    config = root / "agent.toml"
    config.write_text(
        "\n".join(
            [
                'node = "advice-node"',
                "interval = 1",
                f'jobs_dir = "{root / "jobs"}"',
                f'spool_dir = "{root / "spool"}"',
                'pod_labels = ["app"]',
                "[[sinks]]",
                'type = "remote_write"',
                f'url = "{prometheus.url}/api/v1/write"',
            ]
        )
        + "\n"
    )
    argv = [sys.executable, "-m", "falcon_gpu", "run", "--config", str(config), "--simulate", str(scenario)]
    with (root / "agent.log").open("ab") as log:
        agent = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    try:

        def settled() -> bool:
            assert agent.poll() is None, (root / "agent.log").read_text()[-3000:]
            found = values(query(prometheus, "falcon_gpu_advice_held_gpus"), *WORKLOAD)
            small = values(query(prometheus, 'falcon_gpu_advice_memory_peak_bytes{workload="small"}'))
            return set(found) == FINAL and small == {(): 9 * (1 << 30)}

        wait_until(settled, 120, "the advice of every finished workload in Prometheus")

        def recorded() -> bool:  # the rules' latest evaluation has the latest advice
            return set(values(query(prometheus, "workload:falcon_gpu_advice_held:gpus"), *WORKLOAD)) == FINAL

        wait_until(recorded, 30, "the rules over the latest advice")
        yield prometheus
    finally:
        stop(agent)
        prometheus.stop()


def test_series_carry_the_advice(store: ManagedServer) -> None:
    held = values(query(store, "falcon_gpu_advice_held_gpus"), *WORKLOAD)
    recommended = values(query(store, "falcon_gpu_advice_recommended_gpus"), *WORKLOAD)
    assert held == dict.fromkeys(FINAL, 1.0)
    assert recommended[("ml", "small", "1g.10gb")] == pytest.approx(1 / 7, abs=1e-6)
    assert recommended[("ml", "busy", "3g.40gb")] == 0.5
    sm = values(query(store, 'falcon_gpu_advice_sm_active_p95_ratio{workload="small"}'))
    assert sm == {(): pytest.approx(0.10)}


def test_rules_count_workloads_and_gpus_freed(store: ManagedServer) -> None:
    count = values(query(store, "profile:falcon_gpu_advice_workloads:count"), "profile")
    assert count == {("1g.10gb",): 1, ("gpu",): 2, ("3g.40gb",): 1}
    freed = values(query(store, "profile:falcon_gpu_advice_gpus_freed:sum"), "profile")
    assert freed == {("1g.10gb",): 0, ("gpu",): 0, ("3g.40gb",): 0}  # 6/7 and 1/2: no whole GPU alone
    by_model = values(query(store, "model:falcon_gpu_advice_gpus_freed:sum"), "model")
    assert by_model == {("NVIDIA H100 80GB HBM3",): 1}  # 4 held, 1/7 + 1/2 + 2 = 2.64 needed: 3
