"""The Open-Falcon strategy template and the Nightingale rules and dashboard are well formed
and name only what the Open-Falcon schema emits.

The metric names and tag keys are taken from real ``falcon-gpu plugin --simulate`` output on
every bundled scenario, so a renamed item fails here. Field formats are falcon-plus API's own
checks (op, right_value, func) and its nodata fields; the PromQL in the Nightingale files is
parsed by promtool.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.delivery.conftest import need

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf" / "openfalcon"
SCENARIOS = ("default", "mig-node", "shared-gpu", "faulty-node", "gb200-nvl")
FUNC = re.compile(r"^(all|max|min|sum|avg|diff|pdiff)\(#\d+\)$")
OP = re.compile(r"^(>|=|<|!)(=)?$")  # falcon-plus api: strategy op
RIGHT_VALUE = re.compile(r"^\-?\d+(\.\d+)?$")
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
NIGHTINGALE_LABELS = {"ident"}  # Nightingale turns the endpoint into this label


@cache
def emitted() -> dict[str, set[str]]:
    """metric -> the tag keys it is emitted with, over every bundled scenario."""
    out: dict[str, set[str]] = {}
    for scenario in SCENARIOS:
        answer = subprocess.run(
            [sys.executable, "-m", "falcon_gpu", "plugin", "--simulate", scenario],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert answer.returncode == 0, answer.stderr
        for item in json.loads(answer.stdout):
            keys = {pair.split("=")[0] for pair in item["tags"].split(",") if pair}
            out.setdefault(item["metric"], set()).update(keys)
    return out


def load(name: str) -> Any:
    return json.loads((CONF / name).read_text())


def test_strategies_are_what_falcon_plus_accepts() -> None:
    doc = load("strategies.json")
    assert doc["template"]["name"] and doc["template"]["parent_id"] == 0
    metrics = emitted()
    for s in doc["strategies"]:
        assert s["metric"] in metrics, s
        assert FUNC.match(s["func"]) and OP.match(s["op"]) and RIGHT_VALUE.match(s["right_value"]), s
        assert isinstance(s["max_step"], int) and s["max_step"] > 0
        assert isinstance(s["priority"], int) and 0 <= s["priority"] <= 5
        assert s["note"]
        for pair in filter(None, s["tags"].split(",")):
            assert pair.split("=")[0] in metrics[s["metric"]], (s["metric"], pair)


def test_nodata_makes_a_silent_agent_visible() -> None:
    """Every nodata entry mocks a metric the agent always sends, and a strategy fires on the mock."""
    doc = load("strategies.json")
    assert doc["nodata"]
    for nodata in doc["nodata"]:
        assert nodata["obj_type"] in ("group", "host", "other")
        assert nodata["dstype"] == "GAUGE" and isinstance(nodata["step"], int)
        assert nodata["metric"] in emitted()
        firing = [
            s
            for s in doc["strategies"]
            if s["metric"] == nodata["metric"]
            and s["op"] == "=="
            and float(s["right_value"]) == nodata["mock"]
        ]
        assert firing, nodata


def test_main_conditions_have_a_strategy() -> None:
    metrics = {s["metric"] for s in load("strategies.json")["strategies"]}
    assert {
        "GPUHealth",
        "GPUAlive",
        "DoubleBitError",
        "XidErrors",
        "DeviceTemperature",
        "GPUCount",
    } <= metrics


def nightingale_queries() -> list[str]:
    rules = [q["prom_ql"] for r in load("nightingale-alerts.json") for q in r["rule_config"]["queries"]]
    board = load("nightingale-dashboard.json")
    panels = [t["expr"].replace("$ident", ".*") for p in board["configs"]["panels"] for t in p["targets"]]
    return rules + panels


def names_in(promql: str) -> tuple[set[str], set[str]]:
    """(metric names, label names) a PromQL expression uses."""
    labels = set(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!=|!~|=)", " ".join(re.findall(r"\{[^}]*\}", promql))))
    for clause in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", promql):
        labels |= {n.strip() for n in clause.split(",") if n.strip()}
    bare = re.sub(r'\{[^}]*\}|\[[^\]]*\]|"[^"]*"|\b(?:by|without|on|ignoring)\s*\([^)]*\)', " ", promql)
    words = set(re.findall(r"\b([A-Za-z_]\w*)\b(?!\s*\()", bare)) - PROMQL_WORDS
    return words, labels


def test_nightingale_files_name_only_emitted_metrics_and_tags() -> None:
    metrics = emitted()
    tags = set().union(*metrics.values()) | NIGHTINGALE_LABELS
    queries = nightingale_queries()
    assert len(queries) > 15
    for promql in queries:
        used_metrics, used_labels = names_in(promql)
        assert used_metrics and used_metrics <= metrics.keys(), promql
        assert used_labels <= tags, promql


def test_nightingale_promql_parses(tmp_path: Path) -> None:
    rules = [{"record": f"check_{i}", "expr": q} for i, q in enumerate(nightingale_queries())]
    path = tmp_path / "nightingale.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "n9e", "rules": rules}]}))
    answer = subprocess.run([need("promtool"), "check", "rules", str(path)], capture_output=True, text=True)
    assert answer.returncode == 0, answer.stdout + answer.stderr


@pytest.mark.parametrize("rule", load("nightingale-alerts.json"), ids=lambda r: r["name"])
def test_nightingale_rule_is_complete(rule: dict[str, Any]) -> None:
    assert rule["cate"] == "prometheus" and rule["prod"] == "metric"
    assert rule["severity"] in (1, 2, 3) and rule["severities"] == [rule["severity"]]
    assert rule["note"] and rule["rule_config"]["queries"]
