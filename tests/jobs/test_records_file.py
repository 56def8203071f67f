"""The record files (rotation, torn lines), ``falcon-gpu stats`` and the ``jobs_dir`` setting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from falcon_gpu.jobs.records_file import JobLog
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
