"""scripts/bench_fleet.py keeps working: its arithmetic, and a two-agent fleet against the real stores.

The fleet figures in docs/BENCHMARKS.md come from this script; a run of two agents on a 2 s
interval (seconds, not the table's 50 agents at 30 s) checks that what it reads from
VictoriaMetrics, Prometheus and its counting proxy adds up.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.deploy.live import RULE_FILES

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_fleet.py"


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_fleet", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_metric_sum_adds_the_matching_samples_only() -> None:
    text = "\n".join(
        [
            "# HELP vm_rows_inserted_total rows",
            'vm_rows_inserted_total{type="promremotewrite"} 1200',
            'vm_rows_inserted_total{type="influx"} 7',
            'vm_rows_inserted_total_other{type="promremotewrite"} 99',
            'prometheus_tsdb_head_samples_appended_total{type="float"} 30',
            'prometheus_tsdb_head_samples_appended_total{type="histogram"} 2',
        ]
    )
    fleet = bench()
    assert fleet.metric_sum(text, "vm_rows_inserted_total", 'type="promremotewrite"') == 1200
    assert fleet.metric_sum(text, "prometheus_tsdb_head_samples_appended_total") == 32


def test_requests_close_together_are_one_cycle() -> None:
    fleet = bench()
    # a cycle split into two requests, then two more cycles 30 s apart
    assert fleet.cycles_of([100.0, 100.2, 130.1, 160.0], gap=15) == 3
    assert fleet.cycles_of([], gap=15) == 0


def shipped_rules() -> int:
    docs: list[Any] = [yaml.safe_load((ROOT / "conf" / "prometheus" / f).read_text()) for f in RULE_FILES]
    return sum(len(g["rules"]) for d in docs for g in d["groups"])


@pytest.mark.servers
@pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("victoria-metrics") is None,
    reason="prometheus and victoria-metrics are installed by scripts/test.sh",
)
def test_two_agents_reach_both_stores_and_the_figures_add_up(tmp_path: Path) -> None:
    out = tmp_path / "fleet.json"
    argv = [sys.executable, str(SCRIPT), "--agents", "2", "--seconds", "14", "--interval", "2"]
    done = subprocess.run(
        [*argv, "--stagger", "0.1", "--json", str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    r = json.loads(out.read_text())
    vm, prom = r["vm"], r["prom"]
    for store in (vm, prom):
        assert store["nodes"] == 2
        # the pod node carries its pods' series on top of the bare node's
        assert store["series_per_gpu_pod_nodes"] > store["series_per_gpu_bare_nodes"] > 10
        assert store["series"] == pytest.approx(
            8 * (store["series_per_gpu_pod_nodes"] + store["series_per_gpu_bare_nodes"])
        )
        assert store["agent_series_per_node"] > 0
        assert store["cycles_per_node"] >= 2
        # snappy-compressed protobuf, as sent: smaller than the protobuf itself
        assert 0 < store["bytes_per_node_cycle"] < store["raw_bytes_per_node_cycle"]
    assert vm["series"] == prom["series"]  # the same pushes reached both
    assert vm["bytes_per_node_cycle"] == pytest.approx(prom["bytes_per_node_cycle"], rel=0.05)
    # one sample per series per interval (generous: a loaded machine delays cycles)
    assert 0.4 * vm["series"] / 2 < vm["samples_per_s"] < 1.6 * vm["series"] / 2
    assert prom["rules"]["rules"] == shipped_rules()
    assert prom["rules"]["eval_ms_all_groups"] > 0
    assert "| falcon_gpu | default | 2 x 8 |" in done.stdout
