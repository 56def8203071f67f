#!/usr/bin/env python3
"""Resident memory of the agent over 1,000 cycles on a simulated 8-GPU node (64 processes).

Runs the same parts as ``falcon-gpu run`` (NVML source, health, schemas, stdout
sink writing to /dev/null) in this process and reads VmRSS. Peer in the same
run: this interpreter's RSS with everything imported but no cycle run yet.

With ``--refused`` every cycle also goes through a remote_write sink's
``explode`` and ``encode`` (no receiver: the network part is measured in
bench_spool.py) with one series the validator refuses (an invalid label name)
added to each cycle: a refused series must not cost memory cycle after cycle.

With ``--scale`` (issue 19): the whole ``falcon-gpu run`` as the DaemonSet runs it (simulated
NVML and host, attribution on, a ``remote_write`` sink into a local receiver answering 204,
``listen`` scraped once a cycle, interval 1 s) on a node of 8 GPUs, 5,000 processes and 2,000
pods, its VmRSS and VmHWM (peak) read from ``/proc``; then the same parts in this process under
``tracemalloc`` for as many cycles, every traced block charged to its owner: the simulator (a
``falcon_gpu/simulator`` frame in its traceback: the simulated NVML and host, which a real node
does not have), code (imports), or the agent (charged to the innermost agent line: what to
look at). The agent's share of the peak is the peak less what the simulator holds.

Usage: python scripts/bench_memory.py [--cycles 1000] [--refused]
       python scripts/bench_memory.py --scale [--seconds 80] [--processes 5000] [--pods 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path

from bench_common import make_runner, rss_kib, write_scenario
from bench_listen import ROOT, Receiver, cycles, free_port, mem_mib
from gen_scenario import scenario

from falcon_gpu.listen.latest import LatestCycle
from falcon_gpu.model.samples import FalconItem, Family, PromBatch, Series
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks.base import Rendered
from falcon_gpu.sinks.config import RemoteWriteSinkConfig
from falcon_gpu.sinks.remote_write import RemoteWritePusher

REFUSED = Family("falcon_gpu_bench_info", "gauge", "", (Series((("bad-label", "x"),), 1.0),))


@dataclass(frozen=True)
class WithRefused:
    """A rendered cycle plus one series Prometheus would refuse."""

    prometheus: PromBatch
    falcon: tuple[FalconItem, ...] = ()


def remote_write() -> RemoteWritePusher:
    """The sink's pusher alone: ``explode`` and ``encode`` are all this measures."""
    cfg = RemoteWriteSinkConfig(type="remote_write", url="http://127.0.0.1:9/api/v1/write")
    return RemoteWritePusher(cfg, telemetry=Telemetry(), node="bench")


def whole_process(path: Path, seconds: float) -> tuple[list[tuple[int, float]], float, float]:
    """``falcon-gpu run`` for ``seconds``: (cycles, VmRSS MiB) every 10 s, the last VmRSS, VmHWM."""
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    port = free_port()
    sinks = [{"type": "remote_write", "url": f"http://127.0.0.1:{receiver.server_address[1]}/api/v1/write"}]
    env = {**os.environ, "FALCON_GPU_LISTEN": f"127.0.0.1:{port}", "FALCON_GPU_SINKS": json.dumps(sinks),
           "FALCON_GPU_SPOOL_DIR": tempfile.mkdtemp(prefix="bench-memory-"), "FALCON_GPU_NODE": "bench",
           "FALCON_GPU_JOBS_DIR": tempfile.mkdtemp(prefix="bench-memory-jobs-")}  # fmt: skip
    argv = [sys.executable, "-m", "falcon_gpu", "run", "--simulate", str(path), "--interval", "1"]
    proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    marks: list[tuple[int, float]] = []
    try:
        start = time.monotonic()
        while (elapsed := time.monotonic() - start) < seconds:
            time.sleep(1)
            with contextlib.suppress(OSError):
                done = int(cycles(port)[0])  # a scrape a second, as Prometheus would
                if int(elapsed) // 10 > len(marks) - 1:
                    marks.append((done, mem_mib(proc.pid, "VmRSS")))
        rss, hwm = mem_mib(proc.pid, "VmRSS"), mem_mib(proc.pid, "VmHWM")
    finally:
        proc.terminate()
        proc.wait(30)
        receiver.shutdown()
    return marks, rss, hwm


def owner(trace: tracemalloc.Trace) -> tuple[str, str]:
    """(who holds the block, the agent line that allocated it or "")."""
    frames = trace.traceback
    if any("importlib._bootstrap" in f.filename for f in frames):
        return "code (imports)", ""
    ours = [f for f in frames if "/falcon_gpu/" in f.filename]
    if not ours:
        return "other", ""
    if any("/falcon_gpu/simulator/" in f.filename for f in ours):
        return "simulator", ""
    inner = ours[-1]  # oldest first: the last is the innermost
    return "agent", f"{inner.filename.rpartition('/falcon_gpu/')[2]}:{inner.lineno}"


def run_parts(path: Path, n: int, *, traced: bool) -> tracemalloc.Snapshot | None:
    """The DaemonSet's parts in this process for ``n`` cycles, each followed by the gzip'd body a
    scrape asks for; with ``traced``, tracemalloc from just before the runtime is built."""
    from falcon_gpu.agent.commands import _runner
    from falcon_gpu.agent.runtime import build
    from falcon_gpu.settings import load_settings

    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{receiver.server_address[1]}/api/v1/write"
    spool, jobs = tempfile.mkdtemp(prefix="bench-memory-"), tempfile.mkdtemp(prefix="bench-memory-jobs-")
    settings = load_settings(
        None, sinks=[{"type": "remote_write", "url": url}], listen=f"127.0.0.1:{free_port()}",
        node="bench", spool_dir=spool, jobs_dir=jobs,
    )  # fmt: skip
    if traced:
        tracemalloc.start(16)
    rt = build(settings, simulate=str(path), listen=True, with_jobs=True)
    snapshot = None
    try:
        rt.attributor.refresh_now()
        runner = _runner(rt, step=1)
        (latest,) = [s for s in rt.sinks if isinstance(s, LatestCycle)]
        for _ in range(n):
            runner.run()
            latest.body("text", gzipped=True)  # what a scrape asks for, without HTTP's timeouts
        time.sleep(2)  # the sender drains what the last cycles queued
        gc.collect()
        if traced:
            snapshot = tracemalloc.take_snapshot()
    finally:
        rt.close(5)
        receiver.shutdown()
        tracemalloc.stop()
    return snapshot


def traced(path: Path, n: int) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """Traced bytes after ``n`` cycles by owner, by agent file and by agent line. A first run on a
    1-GPU node imports every module untraced, so code is left out and the split is by who holds
    data (the encoder's process-wide line cache keeps that node's few lines: noise)."""
    tiny = write_scenario(1, 1, pods=True)
    run_parts(tiny, 1, traced=False)
    snapshot = run_parts(path, n, traced=True)
    assert snapshot is not None
    owners: Counter[str] = Counter()
    files: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    for trace in snapshot.traces:
        who, line = owner(trace)
        owners[who] += trace.size
        if line:
            files[line.rpartition(":")[0]] += trace.size
            lines[line] += trace.size
    return owners, files, lines


def scale(a: argparse.Namespace) -> None:
    path = Path(tempfile.mkstemp(suffix=".json")[1])
    path.write_text(json.dumps(scenario(a.gpus, a.processes, True, pod_count=a.pods)))
    marks: list[tuple[int, float]] = []
    hwm = 0.0
    if a.seconds > 0:
        marks, rss, hwm = whole_process(path, a.seconds)
        print(f"## whole process: {a.gpus} GPUs, {a.processes} processes, {a.pods} pods, {a.seconds:g} s")
        for done, mib in marks:
            print(f"| after {done} cycles | {mib:.1f} MiB |")
        print(f"| end: VmRSS | {rss:.1f} MiB |\n| VmHWM (peak) | {hwm:.1f} MiB |")
    n = a.traced_cycles or (marks[-1][0] if marks else 60)
    owners, files, lines = traced(path, n)
    mib = 1 << 20
    print(f"## traced after {n} cycles (tracemalloc, same parts in-process)")
    for who, size in owners.most_common():
        print(f"| {who} | {size / mib:.1f} MiB |")
    if hwm:
        print(f"| peak less the simulator's traced memory | {hwm - owners['simulator'] / mib:.1f} MiB |")
    print("## the agent's largest holders (file, then line)")
    for name, size in files.most_common(12):
        print(f"| {name} | {size / mib:.2f} MiB |")
    for name, size in lines.most_common(12):
        print(f"| {name} | {size / mib:.2f} MiB |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument("--scale", action="store_true", help="the DaemonSet's process at 5,000 processes")
    ap.add_argument("--seconds", type=float, default=80.0, help="--scale: how long the whole process runs")
    ap.add_argument("--traced-cycles", type=int, default=0, help="--scale: default as many as it ran")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--processes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument(
        "--refused",
        action="store_true",
        help="also explode + encode for remote_write, one refused series a cycle",
    )
    a = ap.parse_args()
    if a.scale:
        scale(a)
        return
    path = write_scenario(8, 64)
    sink = remote_write() if a.refused else None
    marks_at = {1, 10, 100, 500, 1000, a.cycles}
    with open("/dev/null", "w") as devnull:
        runner = make_runner(path, devnull)
        gc.collect()
        base = rss_kib()
        marks = {}
        for i in range(1, a.cycles + 1):
            rendered: Rendered = runner.run()
            if sink is not None:
                batch = rendered.prometheus
                cycle = WithRefused(PromBatch(batch.timestamp_ms, (*batch.families, REFUSED)))
                sink.encode(sink.explode(cycle))
            if i in marks_at:
                gc.collect()
                marks[i] = rss_kib()
    print(f"| after imports (peer) | {base / 1024:.1f} MB |")
    for i, kib in sorted(marks.items()):
        print(f"| after cycle {i} | {kib / 1024:.1f} MB |")
    print(f"| growth cycle 100 -> {a.cycles} | {(marks[a.cycles] - marks[100]) / 1024:.2f} MB |")


if __name__ == "__main__":
    main()
