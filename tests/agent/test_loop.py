"""The scheduled loop: never overlapping, skips counted, stops cleanly on SIGTERM."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

from falcon_gpu.agent.loop import run_every, settle_heap
from falcon_gpu.model.telemetry import Telemetry

ROOT = Path(__file__).resolve().parents[2]


def test_slow_cycle_is_skipped_and_counted_not_overlapped() -> None:
    telemetry = Telemetry()
    stop = threading.Event()
    running = 0
    max_running = 0
    calls = 0
    lock = threading.Lock()

    def slow_cycle() -> None:
        nonlocal running, max_running, calls
        with lock:
            running += 1
            calls += 1
            max_running = max(max_running, running)
        time.sleep(0.35)
        with lock:
            running -= 1

    threading.Timer(1.3, stop.set).start()
    assert run_every(0.1, slow_cycle, telemetry, stop) is True  # the last cycle finished
    view = telemetry.view()
    assert max_running == 1
    assert calls >= 2
    assert view.cycles_skipped_total >= 1
    assert view.errors_total["cycle_overrun"] == view.cycles_skipped_total


def test_a_cycle_stuck_in_the_driver_does_not_hold_up_the_stop() -> None:
    stop, entered, release = threading.Event(), threading.Event(), threading.Event()
    calls = 0

    def stuck_cycle() -> None:
        nonlocal calls
        calls += 1
        entered.set()
        release.wait(30)

    def stop_once_stuck() -> None:
        entered.wait(10)
        stop.set()

    threading.Thread(target=stop_once_stuck, daemon=True).start()
    try:
        started = time.monotonic()
        assert run_every(0.1, stuck_cycle, Telemetry(), stop, stuck_after=0.5) is False
        assert time.monotonic() - started < 20  # not the 30 s the cycle would still take
    finally:
        release.set()
    time.sleep(0.3)
    assert calls == 1  # nothing queued behind the stuck cycle ran after the stop


def test_run_loop_cycles_then_stops_on_sigterm(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[sinks]]\ntype = "stdout"\nformat = "falcon"\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "--interval", "0.3", "--config", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(3)]  # three cycles, one JSON array each
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert all(line.startswith("[") for line in lines)
    stamps = [__import__("json").loads(line)[0]["timestamp"] for line in lines]
    assert stamps == sorted(stamps)
    assert "SIGTERM" in err


def test_settle_heap_frees_start_up_garbage_and_freezes_what_lives_on() -> None:
    class Node:
        me: object

    garbage = Node()
    garbage.me = garbage  # a reference cycle: only the cyclic collector frees it
    gone = weakref.ref(garbage)
    del garbage
    alive = Node()
    try:
        settle_heap()
        assert gone() is None  # collected first, not frozen for the life of the process
        assert gc.get_freeze_count() > 0
        assert all(o is not alive for o in gc.get_objects())  # out of the collector's sight
    finally:
        gc.unfreeze()
