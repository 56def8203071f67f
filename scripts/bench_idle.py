#!/usr/bin/env python3
"""Whole-process CPU of a running agent, per thread from /proc: idle between cycles, and per cycle.

Starts ``python -m falcon_gpu run --simulate`` on a synthetic 8-GPU, 64-process node
(``gen_scenario.py``; no simulated kubelet, so attribution finds no socket) with a
stdout sink into a pipe this script reads, and reads every thread's CPU time from
``/proc/<pid>/task/<tid>/schedstat`` (nanoseconds, unlike the 10 ms ticks of ``stat``).

- **Idle**: interval 60 s; after the first cycle, a window with no cycle in it: CPU per
  second of the whole process (every thread: scheduler, XID event wait, main loop).
- **Per cycle**: interval 1 s; (CPU per second - idle) / cycles per second, cycles
  counted from the agent's output.

Usage: python scripts/bench_idle.py [--window 20]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_common import write_scenario

MARK = b"# TYPE falcon_gpu_agent_cycles_total"


def thread_cpu_ns(pid: int) -> dict[int, int]:
    out: dict[int, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError):  # the thread ended between listing and reading
            out[int(task.name)] = int((task / "schedstat").read_text().split()[0])
    return out


def agent_command(interval: float, folder: Path) -> list[str]:
    """``falcon-gpu run`` at ``interval`` with a stdout sink (Prometheus text), its config in ``folder``."""
    config = folder / f"agent-{interval:g}.toml"
    config.write_text(
        f'interval = {interval}\nnode = "bench"\nspool_dir = "{folder}/spool"\nlog_level = "warning"\n'
        '[[sinks]]\ntype = "stdout"\nformat = "prometheus"\n'
    )
    return [sys.executable, "-m", "falcon_gpu", "run", "--config", str(config)]


class Counted:
    """A process whose cycles are counted from its stdout (a line starting with ``mark`` per cycle)."""

    def __init__(self, cmd: list[str], env: dict[str, str], mark: bytes = MARK) -> None:
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.mark = mark
        self.cycles = 0
        self._reader = threading.Thread(target=self._count, daemon=True)
        self._reader.start()

    def _count(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(self.mark):
                self.cycles += 1

    def wait_cycles(self, n: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.cycles < n:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"{self.proc.args} did not run {n} cycles (exit code {self.proc.poll()})")
            time.sleep(0.05)

    def window(self, seconds: float) -> tuple[float, dict[int, float], int]:
        """(elapsed s, per-thread CPU ms in the window, cycles in the window)."""
        before, cycles, t0 = thread_cpu_ns(self.proc.pid), self.cycles, time.monotonic()
        time.sleep(seconds)
        after, elapsed = thread_cpu_ns(self.proc.pid), time.monotonic() - t0
        spent = {tid: (ns - before.get(tid, 0)) / 1e6 for tid, ns in after.items()}
        return elapsed, spent, self.cycles - cycles

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


class Agent(Counted):
    def __init__(self, scenario: Path, interval: float, folder: Path) -> None:
        cmd = [*agent_command(interval, folder), "--simulate", str(scenario)]
        super().__init__(cmd, {**os.environ, "NODE_NAME": "bench"})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=float, default=20.0)
    a = ap.parse_args()
    scenario = write_scenario(8, 64)
    with tempfile.TemporaryDirectory() as tmp:
        idle_agent = Agent(scenario, 60, Path(tmp))
        try:
            idle_agent.wait_cycles(1)
            time.sleep(2)  # let the first cycle's sink write and any start-up work settle
            elapsed, idle_threads, cycles = idle_agent.window(a.window)
        finally:
            idle_agent.stop()
        if cycles:
            raise SystemExit("a cycle ran inside the idle window; use a shorter --window")
        busy_agent = Agent(scenario, 1, Path(tmp))
        try:
            busy_agent.wait_cycles(3)
            busy_elapsed, busy_threads, busy_cycles = busy_agent.window(a.window)
        finally:
            busy_agent.stop()
    idle = sum(idle_threads.values()) / elapsed
    total = sum(busy_threads.values()) / busy_elapsed
    per_cycle = (total - idle) / (busy_cycles / busy_elapsed)
    print("| measure | value | target |")
    print("|---|---|---|")
    threads = len(idle_threads)
    print(f"| idle CPU between cycles, whole process ({threads} threads) | {idle:.3f} ms/s | <= 0.3 ms/s |")
    busiest = max(idle_threads.values()) / elapsed
    print(f"| of which the busiest thread | {busiest:.3f} ms/s | |")
    run = f"{busy_cycles} cycles in {busy_elapsed:.1f} s"
    print(f"| whole process at interval 1 s | {total:.2f} ms/s ({run}) | |")
    print(f"| CPU per cycle, 8 GPUs x 64 processes (whole process, idle subtracted) | {per_cycle:.2f} ms | |")


if __name__ == "__main__":
    main()
