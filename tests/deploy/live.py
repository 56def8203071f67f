"""A live store for the live check: Prometheus with the shipped rules, and agents feeding it.

One Prometheus receives remote_write from every agent and evaluates conf/prometheus/*.yml every
second; it also scrapes a Pushgateway that one agent pushes to as well, so that node reaches it
twice (different job/instance), as in a store fed by both paths. A second one (when the agent
has the ``listen`` setting) scrapes the same agents' ``/metrics``. Each agent is the real
``falcon-gpu run --simulate <scenario>``, with its own ``node`` and, when the agent has the
``labels`` setting, ``labels = {cluster = ...}``; an agent whose scenario lists ``api_pods`` also
gets ``pod_requests = true`` (the simulator serves those pods from a loopback API server), so the
requested-vs-used series and rules answer too.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from falcon_gpu.settings import Settings
from falcon_gpu.simulator.scenario.parse import load_scenario, resolve_scenario
from tests.delivery.conftest import ManagedServer, free_port, http_get, need

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "conf" / "prometheus"
RULE_FILES = ("recording.yml", "alerts.yml", "stragglers.yml")
"""The shipped rule files, as scripts/gen_prometheusrule.py lists them (tests/deploy/test_rules.py)."""
HAS_LABELS = "labels" in Settings.model_fields
HAS_LISTEN = "listen" in Settings.model_fields


@dataclass(frozen=True)
class Agent:
    scenario: str
    cluster: str  # as configured; the series carry it only when HAS_LABELS

    @property
    def node(self) -> str:
        return f"gpu-{self.scenario}"

    @property
    def cluster_label(self) -> str:
        return self.cluster if HAS_LABELS else ""

    @property
    def has_api_pods(self) -> bool:
        host = load_scenario(resolve_scenario(self.scenario)).host
        return host is not None and bool(host.api_pods)


def start_pushgateway(root: Path) -> ManagedServer:
    port = free_port()
    server = ManagedServer(
        [need("prometheus-pushgateway"), f"--web.listen-address=127.0.0.1:{port}", "--persistence.file="],
        f"http://127.0.0.1:{port}/-/ready",
        f"http://127.0.0.1:{port}",
        root / "pushgateway.log",
    )
    server.start()
    return server


def start_prometheus(
    root: Path,
    name: str,
    scrape_targets: list[str],
    pushgateway: str = "",
    rule_files: tuple[Path, ...] = tuple(RULES / name for name in RULE_FILES),
) -> ManagedServer:
    """Prometheus with the shipped rules (or ``rule_files``); it scrapes the agents' ``listen``
    addresses and a Pushgateway (``honor_labels``, as docs/DASHBOARDS.md says) when given."""
    port = free_port()
    jobs: list[dict[str, Any]] = []
    if scrape_targets:
        jobs.append({"job_name": "falcon_gpu", "static_configs": [{"targets": scrape_targets}]})
    if pushgateway:
        jobs.append(
            {"job_name": "pushgateway", "honor_labels": True, "static_configs": [{"targets": [pushgateway]}]}
        )
    cfg = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": jobs,
    }
    (root / f"{name}.yml").write_text(json.dumps(cfg))  # JSON is YAML
    server = ManagedServer(
        [
            need("prometheus"),
            f"--config.file={root / f'{name}.yml'}",
            f"--storage.tsdb.path={root / f'{name}-tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-remote-write-receiver",
        ],
        f"http://127.0.0.1:{port}/-/ready",
        f"http://127.0.0.1:{port}",
        root / f"{name}.log",
    )
    server.start()
    return server


def agent_config(
    root: Path, agent: Agent, write_url: str, listen: str, pushgateway_url: str = "", profile: str = ""
) -> Path:
    """``profile``: the ``[metrics] profile`` (none: the agent's default)."""
    lines = [
        f'node = "{agent.node}"',
        "interval = 1",
        f'spool_dir = "{root / agent.node / "spool"}"',
    ]
    if HAS_LABELS:
        lines.append(f'labels = {{cluster = "{agent.cluster}"}}')
    if listen:
        lines.append(f'listen = "{listen}"')
    if agent.has_api_pods:
        lines.append("pod_requests = true")
    if "carbon_intensity" in Settings.model_fields:  # the energy and carbon rules' emissions
        lines.append("carbon_intensity = 400")
    if profile:
        lines += ["[metrics]", f'profile = "{profile}"']
    lines += ["[[sinks]]", 'type = "remote_write"', f'url = "{write_url}"']
    if pushgateway_url:
        lines += ["[[sinks]]", 'type = "pushgateway"', f'url = "{pushgateway_url}"']
    path = root / f"{agent.node}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def start_agent(root: Path, agent: Agent, config: Path) -> subprocess.Popen[bytes]:
    with (root / f"{agent.node}.log").open("ab") as log:
        argv = [
            sys.executable,
            "-m",
            "falcon_gpu",
            "run",
            "--config",
            str(config),
            "--simulate",
            agent.scenario,
        ]
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def query(server: ManagedServer, promql: str, at: float | None = None) -> list[dict[str, Any]]:
    """``/api/v1/query``; raises on an error answer (a bad query, many-to-many, ...)."""
    params = {"query": promql, **({"time": f"{at:.3f}"} if at is not None else {})}
    answer = json.loads(http_get(f"{server.url}/api/v1/query?" + urllib.parse.urlencode(params)))
    assert answer["status"] == "success", (promql, answer)
    return list(answer["data"]["result"])


def values(result: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], float]:
    """``{(label values…): value}`` of an instant query's answer."""
    return {tuple(r["metric"].get(k, "") for k in labels): float(r["value"][1]) for r in result}
