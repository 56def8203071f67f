"""Issue 19, item 2: a step of the wall clock, back or forward, under Debian's ``faketime``.

The agent runs under libfaketime with its offset read from a file on every call
(``FAKETIME_NO_CACHE=1``) and the monotonic clock left alone (``FAKETIME_DONT_FAKE_MONOTONIC=1``):
what an NTP step, a VM resume or ``date -s`` does to a real host. The wall clock steps back an hour
after cycle 3 and forward again after cycle 6. One job (GPU 0, cycles 0-4) spans the back step,
another (GPU 1, cycles 5-9) the forward one. Expected: one cycle per interval throughout (the test
times the cycles on its own, unfaked clock), ``/healthz`` 200 throughout, each job's
``duration_seconds`` within an interval of the time its cycles took, and the step logged once each.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.delivery.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
LIBFAKETIME = next(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"), Path("/nonexistent"))
"""Debian's libfaketime, under the machine's multiarch directory."""


def scenario(tmp_path: Path) -> Path:
    data = json.loads((ROOT / "conf/scenarios/job-node.json").read_text())
    gpu0, gpu1 = data["gpus"]
    gpu0["processes"] = [p for p in gpu0["processes"] if p["pid"] == 7001]
    gpu0["processes"][0].update(until_cycle=5)
    gpu1["processes"][0].update(from_cycle=5, until_cycle=10)
    path = tmp_path / "steps.json"
    path.write_text(json.dumps(data))
    return path


def healthz(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def test_stepping_the_wall_clock_back_and_forward_keeps_cycles_health_and_durations(tmp_path: Path) -> None:
    if shutil.which("faketime") is None or not LIBFAKETIME.exists():
        pytest.skip("Debian's faketime is not installed (scripts/test.sh installs it)")
    offset = tmp_path / "faketime"
    offset.write_text("+0\n")
    jobs = tmp_path / "jobs"
    port = free_port()
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'node = "step-node"\ninterval = 1\nlisten = "127.0.0.1:{port}"\njobs_dir = "{jobs}"\n'
        f'spool_dir = "{tmp_path / "spool"}"\n[[sinks]]\ntype = "stdout"\nformat = "falcon"\n'
    )
    env = {
        **os.environ,
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME_TIMESTAMP_FILE": str(offset),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    env.pop("FALCON_GPU_JOBS_DIR", None)  # the configuration's
    steps = str(scenario(tmp_path))
    argv = [sys.executable, "-m", "falcon_gpu", "run", "--simulate", steps, "--config", str(cfg)]
    log = tmp_path / "agent.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, cwd=ROOT, env=env, text=True)
    assert proc.stdout is not None
    statuses: list[int] = []
    done = threading.Event()

    def poll_health() -> None:
        while not done.wait(0.3):
            statuses.append(healthz(f"http://127.0.0.1:{port}/healthz"))

    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout or ()], daemon=True).start()
    arrivals: list[float] = []
    stamps: list[int] = []
    poller = threading.Thread(target=poll_health, daemon=True)
    try:
        for n in range(1, 13):
            try:
                line = lines.get(timeout=15)
            except queue.Empty:
                raise AssertionError(f"no cycle for 15 s after cycle {n - 1}: {log.read_text()}") from None
            assert line.startswith("["), log.read_text()
            arrivals.append(time.monotonic())
            stamps.append(json.loads(line)[0]["timestamp"])
            if n == 1:
                poller.start()
            if n == 3:
                offset.write_text("-3600\n")  # back an hour
            if n == 6:
                offset.write_text("+0\n")  # and forward again
    finally:
        done.set()
        proc.terminate()
        proc.wait(60)
    text = log.read_text()
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    # the first cycle waits for the first attribution, the second is on the grid: only from there on
    assert all(0.3 < g < 2.5 for g in gaps[1:]), (gaps, text)
    assert stamps[3] - stamps[2] < -3000 and stamps[6] - stamps[5] > 3000, stamps  # samples follow the wall
    assert statuses and set(statuses) == {200}, statuses
    assert text.count("the wall clock stepped back by") == 1, text
    assert text.count("the wall clock stepped forward by") == 1, text
    records = [json.loads(x) for x in (jobs / "jobs.jsonl").read_text().splitlines()]
    assert [r["cycles"] for r in records] == [5, 5], records
    for r in records:  # four intervals between the first and the last of five cycles
        assert abs(r["duration_seconds"] - 4.0) <= 1.0, records
        assert r["end"] - r["start"] == pytest.approx(r["duration_seconds"], abs=0.01)
