"""The Grafana dashboards are importable as committed and say what they must.

What each query answers is checked live (test_live_check.py); here: the committed JSON is what
scripts/gen_dashboards.py writes, and each file has what Grafana's import needs (``__inputs``,
a datasource variable every panel uses) and the variables a user filters by.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.generated import assert_generated_files_current

ROOT = Path(__file__).resolve().parents[2]
BOARDS = sorted((ROOT / "conf" / "grafana").glob("*.json"))
VARIABLES = ["datasource", "cluster", "node", "uuid", "namespace", "pod"]


def load(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def test_committed_dashboards_are_what_the_generator_writes() -> None:
    assert_generated_files_current("gen_dashboards.py")


def test_the_five_dashboards_exist() -> None:
    assert [p.stem for p in BOARDS] == ["cluster", "cost", "health", "node", "pods"]
    assert len({load(p)["uid"] for p in BOARDS}) == 5


@pytest.mark.parametrize("path", BOARDS, ids=lambda p: p.stem)
def test_dashboard_is_importable(path: Path) -> None:
    board = load(path)
    (ds_input,) = board["__inputs"]
    assert (ds_input["type"], ds_input["pluginId"]) == ("datasource", "prometheus")
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert list(variables) == VARIABLES
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["current"]["value"] == "${" + ds_input["name"] + "}"
    for name in VARIABLES[1:]:
        assert variables[name]["allValue"] == ".*", name  # a series without the label still matches
        assert variables[name]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    required_panels = {r["id"] for r in board["__requires"] if r["type"] == "panel"}
    for panel in board["panels"]:
        assert panel["type"] in required_panels
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip()
            # a panel that filters by cluster filters through the variable, never a fixed value
            assert 'cluster="' not in target["expr"]


def test_every_panel_filters_by_cluster() -> None:
    """With several clusters in one store a panel that ignores $cluster mixes them."""
    unfiltered = [
        f"{p.stem}: {panel['title']}"
        for p in BOARDS
        for panel in load(p)["panels"]
        for target in panel["targets"]
        if "$cluster" not in target["expr"]
    ]
    assert unfiltered == []


def test_used_over_requested_panels_per_pod_and_namespace() -> None:
    """Requested vs used (pod_requests): compute and memory, per pod (Pods) and per namespace (Cost),
    each through its recording rule, so no panel divides by a quota of 0 itself."""
    exprs = {
        (p.stem, panel["title"]): target["expr"]
        for p in BOARDS
        for panel in load(p)["panels"]
        for target in panel["targets"]
    }
    wanted = {
        ("pods", "Compute used / requested"): "namespace_pod:falcon_gpu_utilization_of_requested:ratio{",
        ("pods", "Memory used / requested"): "namespace_pod:falcon_gpu_memory_used_of_requested:ratio{",
        (
            "cost",
            "Compute used / requested per namespace",
        ): "namespace:falcon_gpu_utilization_of_requested:ratio{",
        (
            "cost",
            "Memory used / requested per namespace",
        ): "namespace:falcon_gpu_memory_used_of_requested:ratio{",
    }
    for key, rule in wanted.items():
        assert exprs[key].startswith(rule), key
        assert "$namespace" in exprs[key]
