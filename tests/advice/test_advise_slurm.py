"""``falcon-gpu advise`` for Slurm jobs: their records, grouped by the job's name.

On an H100 80GB, a Slurm job named ``train-llm`` runs twice (two job ids, one after the other),
each peaking at 9 GiB and 12 % SM; a third job whose environment the agent cannot read is named
by its id. The real agent (source, attribution, job tracker) writes the records over a scenario
the test writes; the advice reads them as ``falcon-gpu advise`` does.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from falcon_gpu.jobs.records_file import JobLog
from falcon_gpu.model.jobs import JobRecord
from falcon_gpu.settings import Settings
from tests.advice.conftest import Ran, run_cycles, settings_for
from tests.advice.scenario import Node
from tests.advice.test_advise_e2e import _workload, advise

Slurm = tuple[Settings, Ran, dict[str, Any], str]
CYCLES = 48
MEMORY = [7.5] * 10 + [9.0] + [7.5] * 10
SM = [10] * 10 + [12] + [10] * 10


def _node() -> Node:
    node = Node(gpus=2)
    # the peak (9 GiB, 12 %) fits 1g.10gb (9.75 GiB, 16 of 132 SMs) as it is, the p95s with 20 % on top
    node.slurm_job(0, 4101, "train-llm", MEMORY, SM, start=1)
    node.slurm_job(0, 4102, "train-llm", MEMORY, SM, start=24)
    node.slurm_job(1, 4103, None, [30.0] * 6, [60] * 6, start=1)
    return node


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, Ran, dict[str, Any], str]:
    tmp = tmp_path_factory.mktemp("slurm-advise")
    scenario = _node().write(tmp / "scenario.json")
    settings = settings_for(tmp, pod_labels=False)
    ran = run_cycles(settings, scenario, CYCLES, advice=True)
    body = json.loads(advise(settings, scenario, as_json=True))
    return settings, ran, body, advise(settings, scenario)


def _records(settings: Settings) -> list[JobRecord]:
    return sorted(JobLog(settings.jobs_dir).read(), key=lambda r: (r.slurm_job or "", r.start))


def test_each_slurm_job_gets_a_record_named_by_the_job(
    slurm: Slurm,
) -> None:
    records = _records(slurm[0])
    assert [(r.slurm_job, r.workload, r.namespace, r.pod, r.container) for r in records] == [
        ("4101", "train-llm", "", "", ""),
        ("4102", "train-llm", "", "", ""),
        ("4103", "4103", "", "", ""),  # no environment readable: the job id is the workload
    ]
    first = records[0]
    assert first.gpu_model == "NVIDIA H100 80GB HBM3" and first.gpu_index == 0
    assert first.memory_max_bytes == 9 << 30 and first.cycles == len(MEMORY)
    assert first.sm_active_p95_ratio == pytest.approx(0.10)
    assert first.end > first.start


def test_the_name_is_read_once_per_job(slurm: Slurm) -> None:
    # three jobs over 48 cycles (two of them 21 cycles long, one 6): one environ read each
    assert slurm[1].name_reads == 3


def test_two_runs_of_one_name_are_one_workload_on_the_smallest_slice(
    slurm: Slurm,
) -> None:
    body = slurm[2]
    train = _workload(body, "train-llm")
    assert train["namespace"] == "" and train["pods"] == 2 and train["jobs"] == 2
    assert train["memory_peak_bytes"] == 9 << 30
    assert train["sm_p95_ratio"] == pytest.approx(0.10)
    assert 7.5 * (1 << 30) <= train["memory_p95_bytes"] <= 7.5 * 1.02 * (1 << 30)
    assert train["placement"] == "1g.10gb" and train["held"] == 1  # one run after the other
    assert _workload(body, "4103")["placement"] == "gpu"  # 60 % SM x 1.2: more than 4g.40gb's 64 SMs


def test_the_table_lists_slurm_workloads_by_name(slurm: Slurm) -> None:
    lines = slurm[3].splitlines()
    assert any(line.startswith("slurm:train-llm ") and line.endswith("1g.10gb") for line in lines), slurm[3]
    assert any(line.startswith("slurm:4103 ") and line.endswith("gpu") for line in lines), slurm[3]


def test_the_advice_series_carry_the_slurm_workload(slurm: Slurm) -> None:
    last = slurm[1].last
    assert last is not None
    held = {
        dict(s.labels).get("workload"): dict(s.labels)
        for f in last.prometheus.families
        if f.name == "falcon_gpu_advice_held_gpus"
        for s in f.series
    }
    assert "namespace" not in held["train-llm"]  # empty: left out, as Prometheus drops it
    assert held["train-llm"]["profile"] == "1g.10gb"
    assert held["4103"]["profile"] == "gpu"
