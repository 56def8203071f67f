"""Slurm jobs in the job tracker: one record per job and GPU (its steps added up), named for advice,
kept across an agent restart, and out of the Pushgateway groups and Open-Falcon job items."""

from __future__ import annotations

from pathlib import Path

from falcon_gpu.model.attribution import SlurmJobUsage
from falcon_gpu.schemas.openfalcon_jobs import items
from tests.jobs.helpers import UUID, Feeder, use

GIB = 1 << 30


def step(job: str, step: str, memory_gib: int, util: float, energy: float, name: str | None) -> SlurmJobUsage:
    return SlurmJobUsage(job, step, 1000, "alice", name, gpu_uuid=UUID, memory_used_bytes=memory_gib * GIB,
                         utilization_ratio=util, processes=1, energy_joules_total=energy)  # fmt: skip


def test_a_slurm_jobs_steps_make_one_record_by_its_name(tmp_path: Path) -> None:
    feed = Feeder(tmp_path)
    both = (step("77", "0", 3, 0.25, 10.0, "train-llm"), step("77", "1", 2, 0.125, 5.0, "train-llm"))
    feed.cycle([use("main", memory=GIB)], slurm=both)
    feed.tracker.close()
    feed.tracker = feed.new_tracker()  # an agent restart: the open job continues
    feed.cycle([use("main", memory=GIB)], slurm=(step("77", "0", 4, 0.5, 30.0, "train-llm"),))
    ended = feed.cycle([use("main", memory=GIB)])
    (record,) = ended.finished
    assert (record.slurm_job, record.workload, record.namespace, record.pod, record.container) == (
        "77", "train-llm", "", "", "")  # fmt: skip
    assert record.memory_max_bytes == 5 * GIB and record.cycles == 2 and record.restarts == 1
    assert record.utilization_max_ratio == 0.5
    assert ended.groups == ()  # no pod, no Pushgateway group
    assert list(items(ended.finished)) == []
    assert feed.tracker.recent() == [record]
    assert feed.new_tracker().recent() == [record]  # saved with the state


def test_without_a_name_the_job_id_is_the_workload(tmp_path: Path) -> None:
    feed = Feeder(tmp_path)
    feed.cycle([], slurm=(step("78", "batch", 1, 0.1, 1.0, None),))
    (record,) = feed.cycle([use("main")]).finished
    assert record.workload == "78" and record.slurm_job == "78"
