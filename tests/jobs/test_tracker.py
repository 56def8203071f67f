"""The job tracker on hand-built cycles: what a record holds, when it is written, restarts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from falcon_gpu.jobs.records_file import JobLog
from falcon_gpu.model.cycle import FAIL, WARN
from falcon_gpu.model.jobs import JobRecord
from tests.jobs.helpers import MIG, UUID, Feeder, device, use


def records(jobs_dir: Path) -> list[JobRecord]:
    return list(JobLog(jobs_dir).read())


def test_a_record_sums_energy_increments_and_keeps_peaks_means_and_device_events(tmp_path: Path) -> None:
    f = Feeder(tmp_path)
    f.cycle([use("main", processes=0, energy=0.0)])  # allocated, not running yet
    f.cycle(
        [use("main", memory=4, util=0.5, energy=50.0)], devices=[device(reasons=frozenset({"sw_power_cap"}))]
    )
    f.cycle(
        [use("main", memory=10, util=0.9, energy=120.0)],
        devices=[device(ecc=2, reasons=frozenset({"sw_power_cap", "hw_slowdown"}))],
        checks={"xid": WARN},
        xids={13: 1},
    )
    assert f.cycle([use("main", memory=6, util=0.1, energy=200.0)], devices=[device(ecc=5)]).finished == ()
    update = f.cycle([use("main", processes=0, energy=200.0)], checks={"xid": FAIL}, xids={79: 2})
    (rec,) = update.finished
    assert (rec.namespace, rec.pod, rec.container, rec.gpu_uuid, rec.gpu_index) == (
        "ml",
        "train-0",
        "main",
        UUID,
        0,
    )
    assert (rec.start, rec.end, rec.duration_seconds, rec.cycles) == (1010.0, 1030.0, 20.0, 3)
    assert rec.energy_joules == 200.0  # 50 + 70 + 80: every increment from the counter's start
    assert (rec.memory_max_bytes, rec.memory_mean_bytes) == (10, 7)
    assert (rec.utilization_mean_ratio, rec.utilization_max_ratio) == (pytest.approx(0.5), 0.9)
    # events from the job's second cycle up to the cycle that saw it gone
    assert rec.xids == {13: 1, 79: 2}
    assert (rec.ecc_corrected, rec.ecc_uncorrected) == (5, 0)
    assert [(h.check, h.before, h.after, h.at) for h in rec.health_changes] == [
        ("xid", "pass", "warn", 1020.0),
        ("xid", "warn", "pass", 1030.0),
        ("xid", "pass", "fail", 1040.0),
    ]
    assert rec.throttled_seconds == {"hw_slowdown": 10.0, "sw_power_cap": 10.0}
    assert [g.records for g in update.groups] == [(rec,)]
    assert records(tmp_path) == [rec], "the same record is in the file"


def test_a_counter_that_was_running_before_the_job_counts_from_its_last_value(tmp_path: Path) -> None:
    f = Feeder(tmp_path)
    f.cycle([use("main", energy=10.0)])
    f.cycle([use("main", processes=0, energy=10.0)])  # first job ends
    f.cycle([use("main", energy=25.0)])  # second job: its share this cycle is 15
    (rec,) = f.cycle([]).finished  # the pod is gone entirely
    assert rec.energy_joules == 15.0
    assert [r.energy_joules for r in records(tmp_path)] == [10.0, 15.0]


def test_no_utilisation_from_nvml_leaves_the_shares_absent_and_mig_is_named(tmp_path: Path) -> None:
    f = Feeder(tmp_path)
    mig_dev = device(util=None, mig=True)
    f.cycle(
        [use("main", mig=MIG, memory=3, util=None, energy=None)], devices=[mig_dev]
    )  # as attribution gives it
    (rec,) = f.cycle([], devices=[mig_dev]).finished
    assert (rec.utilization_mean_ratio, rec.utilization_max_ratio) == (None, None)
    assert (rec.mig_uuid, rec.mig_profile, rec.gpu_instance) == (MIG, "3g.40gb", 3)
    line = json.loads((tmp_path / "jobs.jsonl").read_text())
    assert line["utilization_mean_ratio"] is None and line["mig_profile"] == "3g.40gb"


def test_a_cycle_without_nvml_or_attribution_closes_nothing(tmp_path: Path) -> None:
    f = Feeder(tmp_path)
    f.cycle([use("main", memory=1)])
    assert f.cycle([], nvml_ok=False).finished == ()
    assert f.cycle([], sources_ok={}).finished == ()  # what the cycle passes when attribution raised
    assert f.cycle([], sources_ok={"cgroup": False, "kubelet": True, "logs": True}).finished == ()
    assert f.cycle([], sources_ok={"cgroup": True, "kubelet": False, "logs": False}).finished == ()  # not yet
    assert f.tracker.open_jobs == 1
    assert len(f.cycle([]).finished) == 1


def test_a_job_spanning_a_restart_is_one_record(tmp_path: Path) -> None:
    f = Feeder(tmp_path)
    f.cycle([use("main", memory=5, energy=0.0)])
    f.cycle([use("main", memory=7, energy=40.0)])
    f.tracker.close()
    f.now += 300  # the agent is down for 5 minutes
    f.tracker = f.new_tracker()  # a new process: its energy ledger starts from 0 again
    assert f.tracker.open_jobs == 1
    f.cycle([use("main", memory=9, energy=0.0)])
    f.cycle([use("main", memory=2, energy=30.0)])
    (rec,) = f.cycle([]).finished
    assert (rec.start, rec.end, rec.cycles, rec.restarts) == (1000.0, 1330.0, 4, 1)
    assert (rec.energy_joules, rec.memory_max_bytes) == (70.0, 9)
    assert records(tmp_path) == [rec]


def test_a_saved_job_whose_container_left_meanwhile_closes_at_its_last_seen_time(tmp_path: Path) -> None:
    f = Feeder(tmp_path)
    f.cycle([use("main", memory=5)])
    f.cycle([use("main", memory=5)])
    f.tracker.close()
    f.now += 600
    f.tracker = f.new_tracker()
    (rec,) = f.cycle([use("other", memory=1)]).finished
    assert (rec.container, rec.end, rec.restarts) == ("main", 1010.0, 1)


def test_open_jobs_are_saved_when_they_change_and_every_n_cycles(tmp_path: Path) -> None:
    f = Feeder(tmp_path, save_every=3)
    state = tmp_path / "open-jobs.json"
    f.cycle([use("main", memory=1)])
    assert len(json.loads(state.read_text())["open"]) == 1, "a new job is saved at once"
    stamp = state.stat().st_mtime_ns
    f.cycle([use("main", memory=1)])
    f.cycle([use("main", memory=1)])
    assert state.stat().st_mtime_ns == stamp, "no save while nothing changed"
    f.cycle([use("main", memory=8)])
    assert json.loads(state.read_text())["open"][0]["memory_max"] == 8


def test_a_pod_group_keeps_the_latest_record_of_each_container_across_a_restart(tmp_path: Path) -> None:
    f = Feeder(tmp_path)
    f.cycle([use("a", memory=1), use("b", memory=2)])
    (ga,) = f.cycle([use("b", memory=2)]).groups
    assert [r.container for r in ga.records] == ["a"]
    f.tracker.close()
    f.tracker = f.new_tracker()
    f.cycle([use("b", memory=2)])
    (gb,) = f.cycle([]).groups
    assert (gb.namespace, gb.pod, sorted(r.container for r in gb.records)) == ("ml", "train-0", ["a", "b"])


def test_an_unwritable_record_file_is_counted_and_the_record_still_rides_on_the_cycle(tmp_path: Path) -> None:
    f = Feeder(tmp_path)
    f.cycle([use("main", memory=1)])
    (tmp_path / "jobs.jsonl").mkdir()  # appending to a directory fails
    assert len(f.cycle([]).finished) == 1
    assert f.telemetry.view().errors_total["jobs"] == 1
    assert f.telemetry.is_failing("jobs:write")


def test_a_corrupt_state_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "open-jobs.json").write_text('{"version": 1, "open": [{"key": 3}]}')
    f = Feeder(tmp_path)
    assert f.tracker.open_jobs == 0
    f.cycle([use("main")])
    assert f.tracker.open_jobs == 1


def test_counters_of_containers_gone_for_good_are_forgotten(tmp_path: Path) -> None:
    f = Feeder(tmp_path, step=100.0, save_every=2)
    for i in range(30):  # a new allocated-but-idle pod every cycle, none ever running
        f.cycle([use("main", pod=f"idle-{i}", processes=0)])
    assert len(f.tracker._totals) <= 11  # 900 s at 100 s per cycle, plus one save period
