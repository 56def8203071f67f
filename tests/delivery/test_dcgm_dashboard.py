"""NVIDIA's own dcgm-exporter dashboard, unchanged, on a Prometheus fed only by remote_write.

Two agents (``schema = "dcgm"``, different nodes: the 4-GPU node and the MIG node)
write into the real Prometheus; then every template variable is resolved as
Grafana does (``label_values(metric{…}, label)`` through the label-values API,
"All" selected: the values joined into a regex) and every panel query runs with
the variables substituted. Every panel answers, the ones on ``DCGM_FI_PROF_*`` (DCGM
profiling) too: GPM gives them on the Hopper GPUs (issue 11), per GPU instance on the MIG board.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.simulator.scenario.parse import resolve_scenario
from tests.delivery.conftest import ManagedServer, http_get, prom_query, wait_until
from tests.delivery.test_agent_e2e import start_agent, stop_agent

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
DASHBOARDS = ("dcgm-exporter-dashboard-instance.json", "dcgm-exporter-dashboard-hostname.json")
NODES = {"node-a": "mixed-4gpu", "node-b": "mig-node"}
BUILTINS = {"__rate_interval": "1m", "__interval": "15s", "__range": "5m", "__range_s": "300"}
PROFILING = "DCGM_FI_PROF_"
LABEL_VALUES = re.compile(r"^label_values\((?:(?P<match>.+),\s*)?(?P<label>\w+)\)$")
pytestmark = pytest.mark.servers


def gpus(scenario: str) -> list[dict[str, Any]]:
    return list(json.loads(resolve_scenario(scenario).read_text())["gpus"])


def gpu_indexes(scenario: str) -> set[str]:
    return {str(i) for i in range(len(gpus(scenario)))}


def every_gpu() -> set[tuple[str, str]]:
    return {(node, g) for node, s in NODES.items() for g in gpu_indexes(s)}


def settled_power(scenario: str) -> float:
    """Σ of each GPU's power once its per-cycle list has run out (the last value repeats)."""
    return sum(float(p[-1] if isinstance(p, list) else p) for p in (g["power_watts"] for g in gpus(scenario)))


@pytest.fixture
def fed(prometheus: ManagedServer, tmp_path: Path) -> Iterator[ManagedServer]:
    """Prometheus with both agents writing into it, while they run."""
    agents = []
    for node, scenario in NODES.items():
        config = tmp_path / f"{node}.toml"
        config.write_text(
            f'node = "{node}"\nschema = "dcgm"\ninterval = 1\nspool_dir = "{tmp_path / node}"\n'
            "[[sinks]]\n"
            f'type = "remote_write"\nurl = "{prometheus.url}/api/v1/write"\nretry_max_delay = 0.5\n'
        )
        agents.append(start_agent(config, tmp_path / f"{node}.log", scenario))

    def every_gpu_is_in() -> bool:
        got = prom_query(prometheus, "count by (Hostname, gpu) (DCGM_FI_DEV_GPU_TEMP)")
        return {(r["metric"]["Hostname"], r["metric"]["gpu"]) for r in got} == every_gpu()

    try:
        wait_until(every_gpu_is_in, 60, "every GPU of both agents in Prometheus")
        time.sleep(2)  # a few cycles more, so range queries have several points
        yield prometheus
    finally:
        for node, proc in zip(NODES, agents, strict=True):
            assert stop_agent(proc) == 0, (tmp_path / f"{node}.log").read_text()[-3000:]


def api(server: ManagedServer, path: str, **params: str) -> Any:
    answer = json.loads(http_get(f"{server.url}/api/v1/{path}?" + urllib.parse.urlencode(params)))
    assert answer["status"] == "success", answer
    return answer["data"]


def grafana_regex(values: list[str]) -> str:
    """A multi-value "All" selection as Grafana writes it for Prometheus: ``(a|b)``, regex-escaped
    (the backslash doubled, since the regex sits in a PromQL string)."""
    return "(" + "|".join(re.sub(r"([\\^$*+?.()|{}\[\]])", r"\\\\\1", v) for v in values) + ")"


def substitute(expr: str, variables: dict[str, str]) -> str:
    """Grafana's ``$name``, ``${name}`` and ``[[name]]``, longest names first."""
    for name in sorted(variables, key=len, reverse=True):
        value = variables[name]
        expr = expr.replace("${" + name + "}", value).replace(f"[[{name}]]", value)
        expr = re.sub(re.escape("$" + name) + r"(?!\w)", lambda _m, v=value: v, expr)  # type: ignore[misc]
    return expr


def resolve_variables(server: ManagedServer, dashboard: dict[str, Any]) -> dict[str, list[str]]:
    """Each query variable's values, in template order (a later query may use an earlier one)."""
    values: dict[str, list[str]] = {}
    for var in dashboard["templating"]["list"]:
        if var["type"] != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        found = LABEL_VALUES.match(substitute(query, selected(values)))
        assert found, f"variable {var['name']}: not a label_values query: {query}"
        params = {"match[]": found["match"]} if found["match"] else {}
        values[var["name"]] = sorted(api(server, f"label/{found['label']}/values", **params))
    return values


def selected(values: dict[str, list[str]]) -> dict[str, str]:
    return {**BUILTINS, **{name: grafana_regex(v) for name, v in values.items()}}


def run_target(server: ManagedServer, target: dict[str, Any], variables: dict[str, str]) -> list[Any]:
    expr = substitute(target["expr"], variables)
    if target.get("instant"):
        return list(api(server, "query", query=expr)["result"])
    now = time.time()
    return list(api(server, "query_range", query=expr, start=str(now - 60), end=str(now), step="5")["result"])


def panel_targets(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["title"]: t for p in dashboard["panels"] for t in p.get("targets", [])}


@pytest.mark.parametrize("name", DASHBOARDS)
def test_nvidias_dashboard_answers_every_panel_from_remote_write_only(fed: ManagedServer, name: str) -> None:
    dashboard = json.loads((FIXTURES / name).read_text())
    values = resolve_variables(fed, dashboard)
    node_var = next(v for v in values if v != "gpu")  # "instance" in the old one, "Hostname" in the new
    assert values[node_var] == sorted(NODES), f"the ${node_var} picker lists every node"
    assert values["gpu"] == sorted({g for _, g in every_gpu()}), "the $gpu picker lists every GPU"

    panels = panel_targets(dashboard)
    assert len(panels) == 8
    assert any(PROFILING in t["expr"] for t in panels.values()), "the fixture has the profiling panels"
    everything = selected(values)
    for title, target in panels.items():
        assert run_target(fed, target, everything), f"{name}: panel {title!r} is empty"
        for node in NODES:  # one node picked, all its GPUs
            chosen = {**everything, node_var: grafana_regex([node])}
            assert run_target(fed, target, chosen), f"{name}: panel {title!r} is empty for {node}"

    # Tensor Core Utilization: the Hopper GPUs only (GPM), each MIG instance on its own
    tensor = run_target(fed, panels["Tensor Core Utilization"], everything)
    hopper = {(node, str(i)) for node, s in NODES.items() for i, g in enumerate(gpus(s)) if "gpm" in g}
    assert {(r["metric"]["Hostname"], r["metric"]["gpu"]) for r in tensor} == hopper
    instances = {r["metric"].get("GPU_I_ID") for r in tensor if r["metric"]["Hostname"] == "node-b"}
    assert instances == {str(m["gpu_instance_id"]) for m in gpus("mig-node")[0]["mig"]}

    temps = run_target(fed, panels["GPU Temperature"], everything)
    assert {(r["metric"]["Hostname"], r["metric"]["gpu"]) for r in temps} == every_gpu()
    # per node, each GPU's power exactly once: the MIG board is not repeated per GPU instance, and no
    # series is left behind (the panel's max-by-gpu would merge GPU 0 of both nodes, so one node at a time)
    for node, scenario in NODES.items():
        chosen = {**everything, node_var: grafana_regex([node])}
        want = settled_power(scenario)

        def total(chosen: dict[str, str] = chosen) -> float:
            (result,) = run_target(fed, panels["GPU Power Total"], chosen)
            return float(result["value"][1])

        def settled(want: float = want) -> bool:
            return abs(total() - want) < 1e-6

        try:
            wait_until(settled, 15, f"GPU Power Total of {node} = {want} W")
        except AssertionError:
            series = run_target(fed, {"expr": "DCGM_FI_DEV_POWER_USAGE", "instant": True}, chosen)
            raise AssertionError(f"{node}: GPU Power Total {total()} W, not {want} W: {series}") from None
