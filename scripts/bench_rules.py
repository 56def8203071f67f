#!/usr/bin/env python3
"""What each shipped rule group costs to evaluate, and its three dearest rules.

Starts the live check's store (Prometheus with conf/prometheus/recording.yml and alerts.yml,
evaluated every second) and its five simulated agents (tests/deploy/live.py), lets them run, then
reads ``prometheus_rule_group_last_duration_seconds`` once a second (the median and the largest of
each group) and ``/api/v1/rules`` ``evaluationTime`` (the dearest rules of the groups named).
Short on purpose (a loaded laptop is noisy): compare groups within one run, not across runs.

Usage: python scripts/bench_rules.py [--seconds 20] [--groups falcon_gpu_risk,falcon_gpu_carbon]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.delivery.conftest import http_get  # noqa: E402
from tests.deploy.live import Agent, agent_config, start_agent, start_prometheus, stop  # noqa: E402

AGENTS = tuple(
    Agent(s, c)
    for s, c in (("mixed-4gpu", "prod-a"), ("shared-gpu", "prod-a"), ("mig-node", "prod-b"),
                 ("faulty-node", "prod-b"), ("gb200-nvl", "prod-b"))
)  # fmt: skip
DURATION = re.compile(r'prometheus_rule_group_last_duration_seconds\{rule_group=".*;(\w+)"\} (\S+)')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=20, help="reads, one a second, after a 20 s warm-up")
    parser.add_argument("--groups", default="falcon_gpu_risk,falcon_gpu_carbon")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-rules-") as tmp:
        root = Path(tmp)
        store = start_prometheus(root, "store", [])
        procs = []
        try:
            for a in AGENTS:
                procs.append(start_agent(root, a, agent_config(root, a, f"{store.url}/api/v1/write", "")))
            time.sleep(20)
            seen: dict[str, list[float]] = {}
            for _ in range(args.seconds):
                for line in http_get(f"{store.url}/metrics").decode().splitlines():
                    if m := DURATION.match(line):
                        seen.setdefault(m.group(1), []).append(float(m.group(2)) * 1000)
                time.sleep(1)
            rules = json.loads(http_get(f"{store.url}/api/v1/rules"))["data"]["groups"]
        finally:
            for proc in procs:
                stop(proc)
            store.stop()
    print("| group | median ms | max ms |\n|---|---|---|")
    for group, ms in sorted(seen.items()):
        print(f"| {group} | {statistics.median(ms):.1f} | {max(ms):.1f} |")
    for g in (g for g in rules if g["name"] in args.groups.split(",")):
        top = sorted(g["rules"], key=lambda r: -r["evaluationTime"])[:3]
        names = ", ".join(
            f"{r['name']}{'{' + r['labels']['reason'] + '}' if 'reason' in r.get('labels', {}) else ''}"
            f" {r['evaluationTime'] * 1000:.1f} ms"
            for r in top
        )
        print(f"{g['name']} dearest: {names}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
