#!/usr/bin/env python3
"""Spool replay and memory with a receiver down, against the local Prometheus.

1. Replay: one hour of a 16-GPU node at a 15 s interval (240 cycles) is spooled while
   Prometheus is down; then Prometheus starts and a fresh sink (the agent restarted)
   replays the spool. Reported: time from the sink's start until the spool is empty
   and every sample is confirmed, spool size, samples. Checked: Prometheus holds every
   sample of the hour afterwards.
2. Memory with the receiver down: RSS after each cycle while 960 cycles (4 h at 15 s) are
   submitted to a sink whose receiver refuses connections (the data goes to the spool, not memory).

Needs the ``prometheus`` binary.
Usage: python scripts/bench_spool.py [--gpus 16] [--cycles 240] [--memory-cycles 960]
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench_common import make_runner, rss_kib, write_scenario

from falcon_gpu.model.samples import FalconItem, PromBatch
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks import remote_write
from falcon_gpu.sinks.base import Sink
from falcon_gpu.sinks.config import RemoteWriteSinkConfig
from falcon_gpu.sinks.context import SinkContext

INTERVAL_MS = 15_000


@dataclass(frozen=True)
class Cycle:
    prometheus: PromBatch
    falcon: tuple[FalconItem, ...] = ()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def hour_of_cycles(gpus: int, cycles: int) -> list[Cycle]:
    runner = make_runner(write_scenario(gpus, gpus * 2), io.StringIO())
    start = int(time.time() * 1000) - cycles * INTERVAL_MS
    return [
        Cycle(PromBatch(start + i * INTERVAL_MS, runner.run().prometheus.families)) for i in range(cycles)
    ]


def start_prometheus(root: Path, port: int) -> subprocess.Popen[bytes]:
    binary = shutil.which("prometheus")
    if binary is None:
        raise SystemExit("prometheus is not installed (apt-get install prometheus)")
    (root / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\n")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={root / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-remote-write-receiver",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.05)
    raise SystemExit("prometheus did not become ready")


def sink(url: str, spool: Path, telemetry: Telemetry) -> Sink:
    cfg = RemoteWriteSinkConfig(type="remote_write", url=url, retry_max_delay=0.5)
    return remote_write.build(
        cfg, SinkContext(spool_dir=spool, spool_max_bytes=256 << 20, telemetry=telemetry)
    )


def replay(gpus: int, cycles: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-spool-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}/api/v1/write"
    hour = hour_of_cycles(gpus, cycles)
    samples = sum(c.prometheus.sample_count() for c in hour)

    down = Telemetry()
    writer = sink(url, root / "spool", down)  # Prometheus not started yet: everything is spooled
    for c in hour:
        writer.submit(c)
    writer.flush(2.0)
    writer.close(0.5)
    spool_bytes = sum(p.stat().st_size for p in (root / "spool" / "remote_write").glob("*.seg"))

    proc = start_prometheus(root, port)
    try:
        up = Telemetry()
        t0 = time.monotonic()
        reader = sink(url, root / "spool", up)
        reader.submit(Cycle(PromBatch(int(time.time() * 1000), ())))  # starts the workers, no samples
        drained = reader.flush(300)
        elapsed = time.monotonic() - t0
        reader.close(5)
        sent = up.view().samples_total.get(("remote_write", "sent"), 0)
        query = urllib.parse.urlencode({"query": "{__name__=~'falcon_gpu_.+'}[2h]"})
        raw = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?{query}").read())
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(root, ignore_errors=True)
    result = raw["data"]["result"]
    stored_n = sum(len(r["values"]) for r in result)
    print(
        f"replay: {cycles} cycles x {samples // cycles} samples = {samples} samples, "
        f"spool {spool_bytes:,} bytes"
    )
    print(
        f"replay: drained={drained} in {elapsed:.2f} s ({samples / elapsed:,.0f} samples/s), "
        f"sent={sent}, stored in Prometheus={stored_n} samples over {len(result)} series"
    )


def memory_with_receiver_down(gpus: int, cycles: int) -> None:
    """Cycles are rendered one at a time (none kept) and submitted as fast as the sink spools
    them (an hour of cycles in seconds); RSS is read after each."""
    root = Path(tempfile.mkdtemp(prefix="bench-mem-"))
    stream = io.StringIO()  # the runner's own stdout sink writes here; emptied every cycle
    runner = make_runner(write_scenario(gpus, gpus * 2), stream)
    telemetry = Telemetry()
    s = sink(f"http://127.0.0.1:{free_port()}/api/v1/write", root, telemetry)  # nobody listens
    start = int(time.time() * 1000) - cycles * INTERVAL_MS
    rss = []
    for i in range(cycles):
        s.submit(Cycle(PromBatch(start + i * INTERVAL_MS, runner.run().prometheus.families)))
        stream.seek(0)
        stream.truncate()
        while not s._queue.empty():  # the batcher has taken it; on a real 15 s interval it always has
            time.sleep(0.001)
        rss.append(rss_kib())
    s.close(0.5)
    spooled = telemetry.view().spool_bytes.get("remote_write", 0)
    shutil.rmtree(root, ignore_errors=True)
    marks = [m for m in (10, 60, 240, 960) if m <= cycles]
    print(
        "memory: RSS "
        + ", ".join(f"after cycle {m} {rss[m - 1] / 1024:.1f} MiB" for m in marks)
        + f" (spool on disk {spooled:,} bytes)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=16)
    ap.add_argument("--cycles", type=int, default=240, help="outage length for the replay (240 = 1 h)")
    ap.add_argument("--memory-cycles", type=int, default=960, help="cycles with the receiver down (4 h)")
    a = ap.parse_args()
    replay(a.gpus, a.cycles)
    memory_with_receiver_down(a.gpus, a.memory_cycles)


if __name__ == "__main__":
    main()
