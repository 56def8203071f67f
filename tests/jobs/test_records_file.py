"""The record files (rotation, torn lines), ``falcon-gpu stats`` and the ``jobs_dir`` setting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from falcon_gpu.jobs.records_file import JobLog
from falcon_gpu.jobs.state import StateFile
from falcon_gpu.jobs.stats import parse_duration, select, table
from falcon_gpu.model.jobs import HealthChange, JobRecord

ROOT = Path(__file__).resolve().parents[2]


def record(
    pod: str = "train-0", *, end: float = 2000.0, namespace: str = "ml", container: str = "main"
) -> JobRecord:
    return JobRecord(
        namespace=namespace,
        pod=pod,
        container=container,
        node="n",
        gpu_index=1,
        gpu_uuid="GPU-a",
        gpu_model="NVIDIA L4",
        start=end - 3725,
        end=end,
        energy_joules=1234.56,
        memory_max_bytes=3 << 30,
        memory_mean_bytes=1 << 30,
        cycles=5,
        utilization_mean_ratio=0.42,
        utilization_max_ratio=0.9,
        xids={13: 2, 79: 1},
        health_changes=(HealthChange("xid", "pass", "fail", end - 5),),
        throttled_seconds={"sw_power_cap": 30.0, "idle": 0.0},
    )


def test_a_record_reads_back_as_written(tmp_path: Path) -> None:
    log = JobLog(tmp_path)
    log.append([record()])
    assert list(log.read()) == [record()]
    assert '"start_iso":"2026' not in (tmp_path / "jobs.jsonl").read_text()  # 1970 here: plain ISO, UTC
    assert '"end_iso":"1970-01-01T00:33:20Z"' in (tmp_path / "jobs.jsonl").read_text()


def test_files_rotate_and_stay_bounded_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    log = JobLog(tmp_path, max_bytes=2000, keep=3)
    for i in range(40):
        log.append([record(f"p{i}", end=2000.0 + i)])
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["jobs.jsonl", "jobs.jsonl.1", "jobs.jsonl.2"]
    assert all(p.stat().st_size <= 2000 for p in tmp_path.iterdir())
    kept = [r.pod for r in log.read()]
    assert kept == sorted(kept, key=lambda p: int(p[1:])) and kept[-1] == "p39", "oldest first, newest kept"
    with log.path.open("a") as fh:
        fh.write('{"namespace": "ml", "pod": "half')  # the disk filled mid-write
    assert [r.pod for r in log.read()] == kept


def slurm_record() -> JobRecord:
    """Every field set, a non-ASCII job name among them (written escaped)."""
    changes = (HealthChange("xid", "pass", "fail", 1050.0), HealthChange("ecc", "pass", "warn", 1060.0))
    return JobRecord(
        namespace="", pod="", container="", node="n1", gpu_index=2, gpu_uuid="GPU-b", gpu_model="NVIDIA H100",
        start=1000.5, end=1100.25, energy_joules=12.5, memory_max_bytes=1 << 30, memory_mean_bytes=5 << 20,
        cycles=4, mig_uuid="MIG-c", mig_profile="1g.10gb", gpu_instance=3, xids={79: 1, 13: 2},
        health_changes=changes,
        throttled_seconds={"sw_power_cap": 30.0}, restarts=1, emissions_grams=0.5, workload="entraînement",
        memory_p95_bytes=900 << 20, sm_active_p95_ratio=0.87, slurm_job="4242",
    )  # fmt: skip


RECORD_LINE = (
    b'{"container":"","cycles":4,"duration_seconds":99.75,"ecc_corrected":0,"ecc_uncorrected":0,'
    b'"emissions_grams":0.5,"end":1100.25,"end_iso":"1970-01-01T00:18:20Z","energy_joules":12.5,'
    b'"gpu_index":2,"gpu_instance":3,"gpu_model":"NVIDIA H100","gpu_uuid":"GPU-b","health_changes":'
    b'[{"at":1050.0,"check":"xid","from":"pass","to":"fail"},{"at":1060.0,"check":"ecc","from":"pass",'
    b'"to":"warn"}],"memory_max_bytes":1073741824,"memory_mean_bytes":5242880,"memory_p95_bytes":943718400,'
    b'"mig_profile":"1g.10gb","mig_uuid":"MIG-c","namespace":"","node":"n1","pod":"","restarts":1,'
    b'"slurm_job":"4242","sm_active_p95_ratio":0.87,"start":1000.5,"start_iso":"1970-01-01T00:16:40Z",'
    b'"throttled_seconds":{"sw_power_cap":30.0},"utilization_max_ratio":null,"utilization_mean_ratio":null,'
    b'"workload":"entra\\u00eenement","xids":{"13":2,"79":1}}\n'
)
"""A record's line as the dataclass record wrote it (before msgspec): the files keep this format."""

STATE = (
    b'{"version":1,"open":[],"recent":[{"namespace":"","pod":"","container":"","node":"n1","gpu_index":2,'
    b'"gpu_uuid":"GPU-b","gpu_model":"NVIDIA H100","start":1000.5,"end":1100.25,"energy_joules":12.5,'
    b'"memory_max_bytes":1073741824,"memory_mean_bytes":5242880,"cycles":4,"mig_uuid":"MIG-c",'
    b'"mig_profile":"1g.10gb","gpu_instance":3,"utilization_mean_ratio":null,"utilization_max_ratio":null,'
    b'"xids":{"79":1,"13":2},"ecc_corrected":0,"ecc_uncorrected":0,"health_changes":[{"check":"xid",'
    b'"from":"pass","to":"fail","at":1050.0},{"check":"ecc","from":"pass","to":"warn","at":1060.0}],'
    b'"throttled_seconds":{"sw_power_cap":30.0},"restarts":1,"emissions_grams":0.5,'
    b'"workload":"entra\\u00eenement","memory_p95_bytes":943718400,"sm_active_p95_ratio":0.87,'
    b'"slurm_job":"4242","duration_seconds":99.75,"start_iso":"1970-01-01T00:16:40Z",'
    b'"end_iso":"1970-01-01T00:18:20Z"}]}'
)
"""The saved state with that record, as the dataclass record wrote it."""


def test_the_record_line_and_the_saved_state_keep_their_bytes(tmp_path: Path) -> None:
    log = JobLog(tmp_path)
    log.append([slurm_record()])
    assert log.path.read_bytes() == RECORD_LINE
    assert list(log.read()) == [slurm_record()]
    state = StateFile(tmp_path)
    state.save([], [slurm_record()])
    assert state.path.read_bytes() == STATE
    assert state.load() == ([], [slurm_record()])


def test_a_record_of_the_first_version_still_loads_and_a_line_of_wrong_types_is_skipped(
    tmp_path: Path,
) -> None:
    first = (  # what the first job-record version wrote: no emissions, workload, p95s or Slurm job
        b'{"container":"main","cycles":3,"duration_seconds":59.99999,"ecc_corrected":1,"ecc_uncorrected":0,'
        b'"end":1060.0,"end_iso":"1970-01-01T00:17:40Z","energy_joules":7,"gpu_index":0,"gpu_instance":null,'
        b'"gpu_model":"NVIDIA L4","gpu_uuid":"GPU-a","health_changes":[{"at":1030,"check":"ecc",'
        b'"from":"pass","to":"warn"}],"memory_max_bytes":2048,"memory_mean_bytes":1024,"mig_profile":null,"mig_uuid":null,'
        b'"namespace":"ml","node":"n","pod":"train-0","restarts":0,"start":1000.00001,'
        b'"start_iso":"1970-01-01T00:16:40Z","throttled_seconds":{"idle":3},"utilization_max_ratio":0.5,'
        b'"utilization_mean_ratio":0.25,"xids":{"79":2}}\n'
    )
    wrong = b'{"namespace":"ml","pod":"p","container":"c","node":"n","gpu_index":"zero","gpu_uuid":"G",' + (
        b'"gpu_model":"m","start":1,"end":2,"energy_joules":0,"memory_max_bytes":0,"memory_mean_bytes":0,"cycles":1}\n'
    )
    (tmp_path / "jobs.jsonl").write_bytes(first + wrong + b"[]\n")
    (rec,) = JobLog(tmp_path).read()
    assert rec == JobRecord(
        namespace="ml", pod="train-0", container="main", node="n", gpu_index=0, gpu_uuid="GPU-a",
        gpu_model="NVIDIA L4", start=1000.00001, end=1060.0, energy_joules=7.0, memory_max_bytes=2048,
        memory_mean_bytes=1024, cycles=3, utilization_mean_ratio=0.25, utilization_max_ratio=0.5,
        xids={79: 2}, ecc_corrected=1, health_changes=(HealthChange("ecc", "pass", "warn", 1030.0),),
        throttled_seconds={"idle": 3.0},
    )  # fmt: skip
    assert (rec.workload, rec.slurm_job, rec.emissions_grams, rec.memory_p95_bytes) == (
        None,
        None,
        None,
        None,
    )
    assert isinstance(rec.energy_joules, float) and isinstance(rec.health_changes[0].at, float)
    assert rec.duration_seconds == 60.0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800.0), ("2h", 7200.0), ("1d", 86400.0), ("90", 90.0), ("1.5h", 5400.0), ("45s", 45.0)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "-5m", "2x", "h", "1h30m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. 30m"):
        parse_duration(text)


def test_select_filters_and_puts_the_newest_first() -> None:
    rs = [record("a", end=100.0), record("b", end=300.0), record("c", end=200.0, namespace="web")]
    assert [r.pod for r in select(rs, namespace=None, pod=None, since=None, now=400)] == ["b", "c", "a"]
    assert [r.pod for r in select(rs, namespace="ml", pod=None, since=None, now=400)] == ["b", "a"]
    assert [r.pod for r in select(rs, namespace=None, pod=None, since=250, now=400)] == ["b", "c"]
    assert [r.pod for r in select(rs, namespace=None, pod="a", since=None, now=400)] == ["a"]
    header, row = table([record()]).splitlines()
    assert (
        " ".join(header.split())
        == "END NAMESPACE POD CONTAINER GPU DURATION ENERGY_J CO2E_G MAX_MEM_MIB AVG_UTIL XIDS THROTTLED"
    )
    assert row.split() == [
        "1970-01-01T00:33:20Z",
        "ml",
        "train-0",
        "main",
        "1",
        "1h02m05s",
        "1234.6",
        "-",  # no carbon_intensity
        "3072",
        "42%",
        "13x2,79",
        "sw_power_cap=30s",
    ]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "falcon_gpu", *args], capture_output=True, text=True, cwd=ROOT, timeout=60
    )


def test_stats_rejects_a_bad_since_with_exit_2() -> None:
    done = cli("stats", "--since", "soon")
    assert done.returncode == 2
    assert "--since" in done.stderr and "Traceback" not in done.stderr


def test_a_jobs_dir_that_cannot_be_created_exits_2_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.delenv("FALCON_GPU_JOBS_DIR")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'jobs_dir = "{tmp_path / "file" / "jobs"}"\n')
    done = cli("run", "--once", "--simulate", "--config", str(cfg))
    assert done.returncode == 2, done.stderr
    assert "setting 'jobs_dir'" in done.stderr and "Traceback" not in done.stderr


def test_an_unusable_default_jobs_dir_costs_only_the_job_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A user trying the agent out cannot write /var/lib: the default jobs_dir is not a reason to
    refuse to run (one the user set is: see the exit-2 test above)."""
    from falcon_gpu.agent import runtime
    from falcon_gpu.agent.runtime import build
    from falcon_gpu.settings import load_settings

    monkeypatch.delenv("FALCON_GPU_JOBS_DIR")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    settings = load_settings(None, spool_dir=tmp_path / "spool")
    assert "jobs_dir" not in settings.explicit
    settings.__dict__["jobs_dir"] = blocker / "jobs"  # as /var/lib/falcon-gpu/jobs is for a user
    # a simulated node keeps its job records in a temporary directory of its own (test_first_hour):
    # keep the unusable default, as a real node would have it
    monkeypatch.setattr(runtime, "_simulated_node_paths", lambda given: (given, None))
    rt = build(settings, simulate="default", with_jobs=True)
    try:
        assert rt.jobs is None
    finally:
        rt.close(1.0)
    assert "no job records: the default jobs_dir" in caplog.text
