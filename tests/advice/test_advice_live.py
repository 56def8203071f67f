"""The advice series through a real Prometheus with the shipped rules.

The real agent (``falcon-gpu run --simulate``, job records on) runs the scenario of
test_advise_e2e.py and remote-writes to Prometheus, which evaluates conf/prometheus/*.yml every
second. Once the advice is final, the series must carry the advice ``falcon-gpu advise``
gives, and the rules must count the workloads per placement and the GPUs freed.

The advice of a running workload changes as its samples come (recomputed when a job finishes
or every 10 cycles): ``small`` is advised 1g.10gb from cycle 7 (trainer-a done; small's peak
not yet seen: 7.5 GiB), 1g.20gb from cycle 15 (trainer-b done; small's one 9 GiB cycle among 15
samples is its p95), and 1g.10gb again from cycle 21 (20 of 21 samples at 7.5 GiB), for good.
So the first 1g.10gb set is not the final one: the fixture waits, in one query over every advice
family, for each family to carry the final set and small's 9 GiB peak under
1g.10gb (only the final view has both), then for a rule evaluation that began after it.
"""

from __future__ import annotations

import subprocess
import sys
import time
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
FAMILIES = 5  # peak, p95, SM p95, held, recommended: each labelled with the advice
RULES = (  # the rules over the advice (conf/prometheus/recording.yml), one group: one evaluation time
    "workload:falcon_gpu_advice_held:gpus",
    "workload:falcon_gpu_advice_recommended:gpus",
    "profile:falcon_gpu_advice_workloads:count",
    "profile:falcon_gpu_advice_gpus_freed:sum",
    "model:falcon_gpu_advice_gpus_freed:sum",
)


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
        settled_at: list[float] = []

        def settled() -> bool:  # one query: the families cannot come from different cycles' views
            assert agent.poll() is None, (root / "agent.log").read_text()[-3000:]
            found = values(query(prometheus, '{__name__=~"falcon_gpu_advice_.+"}'), "__name__", *WORKLOAD)
            by_family: dict[str, set[tuple[str, ...]]] = {}
            for name, *key in found:
                by_family.setdefault(name, set()).add(tuple(key))
            final = len(by_family) == FAMILIES and all(keys == FINAL for keys in by_family.values())
            peak = found.get(("falcon_gpu_advice_memory_peak_bytes", "ml", "small", "1g.10gb"))
            settled_at.append(time.time())
            return final and peak == 9 * (1 << 30)

        wait_until(settled, 120, "the final advice of every workload in Prometheus")
        since = settled_at[-1]

        def recorded() -> bool:  # an evaluation that began after the final advice was stored
            stamps = [r for rule in RULES for r in query(prometheus, f"timestamp({rule})")]
            held = values(query(prometheus, "workload:falcon_gpu_advice_held:gpus"), *WORKLOAD)
            return min((float(r["value"][1]) for r in stamps), default=0.0) > since and set(held) == FINAL

        wait_until(recorded, 30, "the rules over the final advice")
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
