#!/usr/bin/env python3
"""The agent process's footprint, and what ``/metrics`` costs under 10 concurrent scrapers.

Runs the real ``falcon-gpu run`` (simulated NVML, simulated host with pods: attribution on, a
remote_write sink into a local receiver that answers 204, ``listen`` on) on synthetic nodes
(``gen_scenario.py --pods``), and reads the process's CPU time (utime + stime) and memory
(VmRSS, VmHWM) from ``/proc/<pid>``.

Footprint: CPU per cycle = CPU time over a window / cycles in it (interval 1 s, after warm-up).
Scrapers: 10 threads, each with its own keep-alive connection, GET /metrics with
``Accept-Encoding: gzip`` as Prometheus does; once every second each (the realistic load: ten
Prometheus servers at a 1 s interval), then back to back (a flood). Peers in the same run: the
same window with no scraper (the agent's own CPU), and one encoding (text + gzip) of that
node's cycle in this process, which is what every scrape would cost without the per-cycle cache.

Usage: cd scripts && python bench_listen.py [--seconds 20] [--sizes 4x16,8x64,16x256]
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench_common import make_runner, write_scenario

from falcon_gpu.sinks.encoding import prom_text

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def mem_mib(pid: int, key: str) -> float:
    found = re.search(rf"^{key}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    return int(found[1]) / 1024 if found else 0.0


def scrape(port: int, path: str = "/metrics") -> tuple[bytes, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    t0 = time.perf_counter()
    conn.request("GET", path, headers={"Accept-Encoding": "gzip"})
    body = conn.getresponse().read()
    conn.close()
    return body, time.perf_counter() - t0


def cycles(port: int) -> tuple[float, float]:
    """(cycles_total, last cycle seconds) from the agent's own series."""
    body, _ = scrape(port)
    text = gzip.decompress(body).decode()
    total = re.search(r"^falcon_gpu_agent_cycles_total\{[^}]*\} (\S+)$", text, re.M)
    secs = re.search(r"^falcon_gpu_agent_cycle_seconds\{[^}]*\} (\S+)$", text, re.M)
    return (float(total[1]) if total else 0.0, float(secs[1]) if secs else 0.0)


def scrapers(port: int, seconds: float, every: float | None, n: int = 10) -> list[float]:
    """n threads scraping for ``seconds``; ``every``: seconds between one thread's scrapes."""
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def worker() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        mine = []
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
            conn.getresponse().read()
            mine.append(time.perf_counter() - t0)
            if every:
                time.sleep(max(0.0, every - (time.perf_counter() - t0)))
        conn.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies


def window(pid: int, port: int, seconds: float, every: float | None, n: int) -> dict[str, float]:
    c0, cpu0 = cycles(port)[0], cpu_s(pid)
    lat = scrapers(port, seconds, every, n) if n else (time.sleep(seconds) or [])
    c1, last = cycles(port)
    cpu = cpu_s(pid) - cpu0
    lat.sort()
    return {
        "cpu_s": cpu,
        "cycles": c1 - c0,
        "scrapes": len(lat),
        "p50_ms": statistics.median(lat) * 1000 if lat else 0.0,
        "p99_ms": lat[int(len(lat) * 0.99) - 1] * 1000 if lat else 0.0,
        "last_cycle_ms": last * 1000,
    }


def one_encoding_ms(scenario: Path) -> tuple[float, int, int]:
    with open(os.devnull, "w") as devnull:
        runner = make_runner(scenario, devnull)
        rendered = runner.run()
        cache = prom_text.SeriesText()  # kept across the repeats, as listen keeps its own
        times = []
        for _ in range(20):
            t0 = time.process_time()
            text = prom_text.encode(rendered.prometheus, cache).encode()
            packed = gzip.compress(text, 6)
            times.append(time.process_time() - t0)
    return statistics.median(times) * 1000, len(text), len(packed)


def bench(gpus: int, procs: int, seconds: float) -> None:
    scenario = write_scenario(gpus, procs, pods=True)
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    port = free_port()
    sinks = [{"type": "remote_write", "url": f"http://127.0.0.1:{receiver.server_address[1]}/api/v1/write"}]
    spool = tempfile.mkdtemp(prefix="bench-listen-")
    env = {**os.environ, "FALCON_GPU_LISTEN": f"127.0.0.1:{port}", "FALCON_GPU_SINKS": json.dumps(sinks),
           "FALCON_GPU_SPOOL_DIR": spool, "FALCON_GPU_NODE": "bench"}  # fmt: skip
    argv = [sys.executable, "-m", "falcon_gpu", "run", "--simulate", str(scenario), "--interval", "1"]
    proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if scrape(port, "/readyz")[0] == b"ready\n":
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("agent did not become ready")
            time.sleep(0.2)
        time.sleep(5)  # warm-up: attribution lookups, remote_write connection
        idle = window(proc.pid, port, seconds, None, 0)
        paced = window(proc.pid, port, seconds, 1.0, 10)
        flood = window(proc.pid, port, seconds, None, 10)
        rss, hwm = mem_mib(proc.pid, "VmRSS"), mem_mib(proc.pid, "VmHWM")
    finally:
        proc.terminate()
        proc.wait(30)
        receiver.shutdown()
    enc_ms, text_b, gz_b = one_encoding_ms(scenario)
    name = f"{gpus} GPUs x {procs} pods"
    per_cycle = idle["cpu_s"] / max(idle["cycles"], 1) * 1000
    print(f"footprint | {name} | CPU/cycle {per_cycle:.1f} ms | RSS {rss:.1f} MiB | peak {hwm:.1f} MiB "
          f"| last cycle {idle['last_cycle_ms']:.1f} ms")  # fmt: skip
    for label, w in (("10 x every 1 s", paced), ("10 x back to back", flood)):
        extra = w["cpu_s"] - idle["cpu_s"] * w["cycles"] / max(idle["cycles"], 1)
        print(
            f"scrape | {name} | {label} | {w['scrapes'] / seconds:.0f} req/s | p50 {w['p50_ms']:.2f} ms | "
            f"p99 {w['p99_ms']:.2f} ms | CPU/scrape {extra / max(w['scrapes'], 1) * 1000:.2f} ms | "
            f"cycles {w['cycles']:.0f}/{idle['cycles']:.0f} | last cycle {w['last_cycle_ms']:.1f} ms"
        )
    print(f"peer | {name} | one text+gzip encoding {enc_ms:.2f} ms CPU | {text_b} B -> {gz_b} B gzip")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--sizes", default="4x16,8x64,16x256", help="GPUSxPODS,...")
    a = ap.parse_args()
    for size in a.sizes.split(","):
        gpus, procs = (int(x) for x in size.split("x"))
        bench(gpus, procs, a.seconds)


if __name__ == "__main__":
    main()
