#!/usr/bin/env python3
"""A fleet, measured (issue 22): N agents remote-writing to one VictoriaMetrics and one Prometheus.

What a team asks before adopting a GPU exporter is what it costs to store: series per GPU, samples
a second, bytes on the wire per node and cycle, and what the shipped rules cost to evaluate. This
starts the real thing on loopback and reads the answers from the stores themselves:

- the stores: the Debian ``victoria-metrics`` and ``prometheus`` (``--web.enable-remote-write-receiver``,
  the shipped rules of ``conf/prometheus/`` loaded, evaluated every interval);
- the agents: ``--agents`` real ``falcon-gpu run --simulate`` processes, 8 GPUs each
  (``scripts/gen_scenario.py``), pods on every second node, each its own ``node``, the given
  ``--schema`` on two ``remote_write`` sinks (one per store);
- between them a counting HTTP proxy: the agent has no bytes counter, so the proxy records each
  request body as sent (protobuf + snappy block) per store and node, then forwards it.

Series: ``count by (instance)`` of everything in each store while the agents still run (per GPU:
divided by 8). Samples/s: the stores' own ingest counters (Prometheus
``prometheus_tsdb_head_samples_appended_total``, VictoriaMetrics ``vm_rows_inserted_total``) over
whole intervals in the last half of the run (Prometheus's count includes what the recording rules
write). Rules: ``/api/v1/rules`` ``evaluationTime``, polled through the last half: the median of
each group's evaluations, summed over the groups.

Usage: python scripts/bench_fleet.py --schema falcon_gpu [--profile default|full] [--agents 50]
[--seconds 210] [--interval 30] (``--include dcgm-exporter``: that list as ``[metrics] include``;
with ``--profile full``, only it)
Prints one Markdown table row and, with ``--json``, every figure as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import cramjam

from falcon_gpu.schemas import profiles

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_prometheusrule import RULE_FILES
from gen_scenario import scenario

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "conf" / "prometheus"
GPUS = 8

DCGM_EXPORTER_DEFAULT = profiles.DCGM_EXPORTER_DEFAULT
"""The uncommented ``DCGM_FI_DEV_*`` fields of dcgm-exporter's ``etc/default-counters.csv``
(NVIDIA/dcgm-exporter, commit b54068a9): dcgm-exporter emits one series per field per GPU, 21 a GPU."""


# -- pure parts (unit-tested) ---------------------------------------------------------------------
def metric_sum(text: str, name: str, match: str = "") -> float:
    """The sum of every sample of ``name`` in Prometheus text exposition (a store's ``/metrics``)
    whose label set contains ``match`` (e.g. ``type="promremotewrite"``)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        series = head.split("{", 1)
        if series[0] != name or (match and match not in head):
            continue
        total += float(value)
    return total


def cycles_of(times: list[float], gap: float) -> int:
    """How many cycles a node's pushes were: requests closer than ``gap`` seconds apart belong to one
    cycle (an agent may split a cycle into several requests; its cycles are an interval apart)."""
    count, last = 0, float("-inf")
    for t in sorted(times):
        if t - last > gap:
            count += 1
        last = t
    return count


class Pushes:
    """What the proxy saw, per (store, node): request times, body bytes, uncompressed bytes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.times: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.sent: dict[tuple[str, str], int] = defaultdict(int)
        self.raw: dict[tuple[str, str], int] = defaultdict(int)

    def record(self, store: str, node: str, body: bytes) -> None:
        try:
            raw = len(bytes(cramjam.snappy.decompress_raw(body)))
        except cramjam.DecompressionError:
            raw = 0
        with self._lock:
            self.times[(store, node)].append(time.monotonic())
            self.sent[(store, node)] += len(body)
            self.raw[(store, node)] += raw

    def per_cycle(self, store: str, gap: float) -> tuple[float, float, float]:
        """Median over nodes of (compressed bytes per cycle, uncompressed bytes per cycle, cycles)."""
        with self._lock:
            keys = [k for k in self.times if k[0] == store]
            rows = [(self.sent[k], self.raw[k], cycles_of(self.times[k], gap)) for k in keys]
        rows = [r for r in rows if r[2]]
        if not rows:
            return 0.0, 0.0, 0.0
        return (
            statistics.median(s / c for s, _, c in rows),
            statistics.median(r / c for _, r, c in rows),
            statistics.median(c for _, _, c in rows),
        )


# -- servers --------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, timeout: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return bytes(resp.read())


def wait_ready(url: str, proc: subprocess.Popen[bytes], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        try:
            get(url, timeout=1)
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{what} not ready after {timeout:.0f}s")


def binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SystemExit(f"{name} is not installed (scripts/test.sh installs it from Debian)")
    return path


def start_stores(root: Path, interval: int) -> tuple[dict[str, str], list[subprocess.Popen[bytes]]]:
    """VictoriaMetrics and Prometheus (the shipped rules, evaluated every ``interval``) on free ports."""
    vm_port, prom_port = free_port(), free_port()
    cfg = {
        "global": {"scrape_interval": f"{interval}s", "evaluation_interval": f"{interval}s"},
        "rule_files": [str(RULES / name) for name in RULE_FILES],
    }
    (root / "prometheus.yml").write_text(json.dumps(cfg))  # JSON is YAML
    argv = {
        "vm": [
            binary("victoria-metrics"),
            f"-httpListenAddr=127.0.0.1:{vm_port}",
            f"-storageDataPath={root / 'vm'}",
            "-search.latencyOffset=0s",
            "-search.disableCache",
        ],
        "prom": [
            binary("prometheus"),
            f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={root / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            "--web.enable-remote-write-receiver",
        ],
    }
    urls = {"vm": f"http://127.0.0.1:{vm_port}", "prom": f"http://127.0.0.1:{prom_port}"}
    ready = {"vm": "/health", "prom": "/-/ready"}
    procs = []
    for store, args in argv.items():
        with (root / f"{store}.log").open("ab") as log:
            procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT))
        wait_ready(urls[store] + ready[store], procs[-1], args[0])
    return urls, procs


def proxy_handler(upstream: dict[str, str], pushes: Pushes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        """``POST /<store>/<node>/api/v1/write``: counted, then forwarded to ``<store>``'s write URL."""

        protocol_version = "HTTP/1.1"  # keep-alive, as the agent's connection to a real store

        def do_POST(self) -> None:
            _, store, node, rest = self.path.split("/", 3)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            pushes.record(store, node, body)
            keep = ("Content-Type", "Content-Encoding", "User-Agent")
            headers = {k: v for k, v in self.headers.items() if k in keep or k.startswith("X-")}
            req = urllib.request.Request(f"{upstream[store]}/{rest}", data=body, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    status, answer = resp.status, resp.read()
            except urllib.error.HTTPError as exc:
                status, answer = exc.code, exc.read()
            except OSError as exc:
                status, answer = 502, str(exc).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def counting_proxy(upstream: dict[str, str], pushes: Pushes) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), proxy_handler(upstream, pushes))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# -- agents ---------------------------------------------------------------------------------------
def node_name(i: int) -> str:
    return f"bench-{i:03d}{'-pods' if i % 2 == 0 else ''}"


def agent_config(root: Path, i: int, args: argparse.Namespace, proxy: str) -> Path:
    node = node_name(i)
    lines = [
        f'node = "{node}"',
        f"interval = {args.interval}",
        f'schema = "{args.schema}"',
        f'spool_dir = "{root / node / "spool"}"',
        f'jobs_dir = "{root / node / "jobs"}"',
    ]
    lines += ["[metrics]", f'profile = "{args.metrics_profile}"']
    if args.include:
        lines.append(f"include = {json.dumps(args.include.split(','))}")
    for store in ("vm", "prom"):
        lines += ["[[sinks]]", 'type = "remote_write"', f'name = "{store}"']
        lines.append(f'url = "{proxy}/{store}/{node}/api/v1/write"')
    path = root / f"{node}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def start_agents(root: Path, args: argparse.Namespace, proxy: str) -> list[subprocess.Popen[bytes]]:
    files = {}
    for pods in (True, False):
        files[pods] = root / f"node-{'pods' if pods else 'bare'}.json"
        files[pods].write_text(json.dumps(scenario(GPUS, args.processes, pods, args.profiling)))
    procs = []
    for i in range(args.agents):
        config = agent_config(root, i, args, proxy)
        argv = [sys.executable, "-m", "falcon_gpu", "run", "--config", str(config)]
        argv += ["--simulate", str(files[i % 2 == 0])]
        with (root / f"{node_name(i)}.log").open("ab") as log:
            procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT))
        time.sleep(args.stagger)  # spread their start-up (imports: about a CPU second each)
    return procs


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- measures -------------------------------------------------------------------------------------
def query(url: str, promql: str) -> list[dict[str, Any]]:
    answer = json.loads(get(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})))
    if answer.get("status") != "success":
        raise SystemExit(f"{promql}: {answer}")
    return list(answer["data"]["result"])


def series_by_node(url: str, names: str = ".+") -> dict[str, float]:
    """Series per node (``instance``, the node on remote_write) whose name matches regex ``names``."""
    result = query(url, f'count by (instance) ({{__name__=~"{names}",instance=~"bench-.*"}})')
    return {r["metric"].get("instance", ""): float(r["value"][1]) for r in result}


def ingested(urls: dict[str, str]) -> dict[str, float]:
    vm = get(urls["vm"] + "/metrics").decode()
    prom = get(urls["prom"] + "/metrics").decode()
    return {
        "vm": metric_sum(vm, "vm_rows_inserted_total", 'type="promremotewrite"'),
        "prom": metric_sum(prom, "prometheus_tsdb_head_samples_appended_total"),
    }


class RuleTimes:
    """Every evaluation of every rule group seen while polling ``/api/v1/rules`` (one reading is
    one evaluation: a loaded machine makes single ones jump, so the median per group is kept)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], float] = {}
        self.groups = self.rules = 0

    def poll(self, url: str) -> None:
        groups = json.loads(get(url + "/api/v1/rules"))["data"]["groups"]
        self.groups, self.rules = len(groups), sum(len(g["rules"]) for g in groups)
        for g in groups:
            if not str(g.get("lastEvaluation", "")).startswith("0001"):  # not evaluated yet
                self.seen[(g["name"], g["lastEvaluation"])] = float(g["evaluationTime"])

    def summary(self) -> dict[str, float]:
        per_group: dict[str, list[float]] = defaultdict(list)
        for (group, _), seconds in self.seen.items():
            per_group[group].append(seconds)
        medians = [statistics.median(v) for v in per_group.values()]
        return {
            "groups": self.groups,
            "rules": self.rules,
            "evaluations_seen": len(self.seen),
            "eval_ms_all_groups": sum(medians) * 1000,
            "eval_ms_max_seen": max(self.seen.values(), default=0.0) * 1000,
        }


def per_gpu(by_node: dict[str, float], pods: bool | None = None) -> float:
    counts = [v for k, v in by_node.items() if pods is None or k.endswith("-pods") == pods]
    return statistics.mean(counts) / GPUS if counts else 0.0


def measure(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    urls, stores = start_stores(root, args.interval)
    pushes = Pushes()
    agents: list[subprocess.Popen[bytes]] = []
    try:
        with counting_proxy(urls, pushes) as proxy:
            started = time.monotonic()
            agents = start_agents(root, args, proxy)
            # the rate over whole intervals ending at the end: every agent pushed as often in it
            window = max(1, int(args.seconds / 2 // args.interval)) * args.interval
            time.sleep(max(0.0, started + args.seconds - window - time.monotonic()))
            t0, in0 = time.monotonic(), ingested(urls)
            rule_times = RuleTimes()
            while (left := started + args.seconds - time.monotonic()) > 0:
                rule_times.poll(urls["prom"])
                time.sleep(min(left, args.interval / 6))
            t1, in1 = time.monotonic(), ingested(urls)
            down = [i for i, p in enumerate(agents) if p.poll() is not None]
            if down:
                log = (root / f"{node_name(down[0])}.log").read_text()[-2000:]
                raise SystemExit(f"{len(down)} agents exited, the first:\n{log}")
            cpu = sum(cpu_seconds(p.pid) for p in agents)
            out: dict[str, Any] = {
                "schema": args.schema,
                "profile": args.profile,
                "agents": args.agents,
                "gpus": args.agents * GPUS,
                "interval_s": args.interval,
                "seconds": args.seconds,
                "agent_cpu_s_per_agent": cpu / args.agents,
                "loadavg_1m": os.getloadavg()[0],
            }
            default = "|".join(DCGM_EXPORTER_DEFAULT)
            for store, url in urls.items():
                by_node = series_by_node(url)
                own = series_by_node(url, "falcon_gpu_agent_.*")
                dcgm = series_by_node(url, default)
                sent, raw, cycles = pushes.per_cycle(store, args.interval / 2)
                found = {
                    r["metric"]["__name__"]
                    for r in query(url, f'count by (__name__) ({{__name__=~"{default}"}})')
                }
                out[store] = {
                    "dcgm_default_fields_missing": sorted(set(DCGM_EXPORTER_DEFAULT) - found),
                    "series": sum(by_node.values()),
                    "nodes": len(by_node),
                    "series_per_gpu": per_gpu(by_node),
                    "series_per_gpu_pod_nodes": per_gpu(by_node, True),
                    "series_per_gpu_bare_nodes": per_gpu(by_node, False),
                    "agent_series_per_node": statistics.mean(own.values()) if own else 0.0,
                    "dcgm_default_fields_series_per_gpu": per_gpu(dcgm),
                    "samples_per_s": (in1[store] - in0[store]) / (t1 - t0),
                    "bytes_per_node_cycle": sent,
                    "raw_bytes_per_node_cycle": raw,
                    "cycles_per_node": cycles,
                }
            rule_times.poll(urls["prom"])
            out["prom"]["rules"] = rule_times.summary()
            return out
    finally:
        stop_all(agents)
        stop_all(stores)


def row(r: dict[str, Any]) -> str:
    vm, prom = r["vm"], r["prom"]
    rl = prom["rules"]
    return (
        f"| {r['schema']} | {r['profile']} | {r['agents']} x {GPUS} | {vm['series_per_gpu']:.1f} "
        f"({vm['series_per_gpu_pod_nodes']:.1f} / {vm['series_per_gpu_bare_nodes']:.1f}) "
        f"| {prom['series_per_gpu']:.1f} | {vm['samples_per_s']:.0f} / {prom['samples_per_s']:.0f} "
        f"| {vm['bytes_per_node_cycle']:.0f} ({vm['raw_bytes_per_node_cycle']:.0f}) "
        f"| {rl['eval_ms_all_groups']:.1f} ({rl['groups']} groups, {rl['rules']} rules) |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--schema", default="falcon_gpu", help="the agents' Prometheus schema")
    ap.add_argument("--agents", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=210, help="from the first agent's start to the readings")
    ap.add_argument("--interval", type=int, default=30)
    ap.add_argument("--processes", type=int, default=16, help="processes per node (8 GPUs)")
    ap.add_argument("--profiling", action="store_true", help="GPM, PCIe and 18 NVLinks per GPU")
    ap.add_argument("--stagger", type=float, default=0.3, help="seconds between agent starts")
    ap.add_argument(
        "--include",
        default="",
        help="[metrics] include: comma-separated globs; 'dcgm-exporter': its default fields",
    )
    ap.add_argument(
        "--profile", dest="metrics_profile", choices=("default", "full"), default="default", help="[metrics]"
    )
    ap.add_argument("--json", type=Path, help="write every figure here")
    args = ap.parse_args()
    args.profile = f"{args.metrics_profile}, include {args.include}" if args.include else args.metrics_profile
    if args.include == "dcgm-exporter":
        args.include = ",".join(DCGM_EXPORTER_DEFAULT)
    root = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    try:
        result = measure(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(row(result))


if __name__ == "__main__":
    main()
