"""The shipped Prometheus rules load, and their promtool unit tests pass.

The unit tests (``conf/prometheus/tests/*.yml``) hold synthetic series with the expected
recorded values and alert firings; promtool evaluates the real rule files on them, the way
Prometheus does. promtool comes with Debian's ``prometheus`` package (scripts/test.sh).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from falcon_gpu.health.evaluator import CRITICAL_XIDS
from tests.delivery.conftest import need
from tests.deploy.live import RULE_FILES

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "conf" / "prometheus"
UNIT_TESTS = sorted((RULES / "tests").glob("*.yml"))


def promtool(*args: str, cwd: Path = RULES) -> subprocess.CompletedProcess[str]:
    return subprocess.run([need("promtool"), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_rule_files_are_the_generators_and_every_file_here() -> None:
    """live.py, bench_fleet.py and the PrometheusRule load the same files: all of conf/prometheus."""
    spec = importlib.util.spec_from_file_location(
        "gen_prometheusrule", ROOT / "scripts" / "gen_prometheusrule.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.RULE_FILES == RULE_FILES
    assert sorted(RULE_FILES) == sorted(p.name for p in RULES.glob("*.yml"))


@pytest.mark.parametrize("name", RULE_FILES)
def test_rule_file_is_valid(name: str) -> None:
    answer = promtool("check", "rules", name)
    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert "SUCCESS" in answer.stdout


def test_unit_tests_cover_every_rule_file() -> None:
    names = {p.name for p in UNIT_TESTS}
    assert {name.replace(".yml", "_test.yml") for name in RULE_FILES} <= names


@pytest.mark.parametrize("unit", UNIT_TESTS, ids=lambda p: p.name)
def test_promtool_unit_tests_pass(unit: Path) -> None:
    answer = promtool("test", "rules", unit.name, cwd=unit.parent)
    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert "SUCCESS" in answer.stdout


@pytest.mark.parametrize("name", RULE_FILES)
def test_every_alert_has_a_unit_test(name: str) -> None:
    """An alert nobody fired in a unit test is an alert nobody knows works."""
    alerts = {
        rule["alert"]
        for group in yaml.safe_load((RULES / name).read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    fired: set[str] = set()
    for unit in UNIT_TESTS:  # alerts_test.yml, and risk_test.yml for the alert that reads the risk rules
        for group in yaml.safe_load(unit.read_text())["tests"]:
            fired |= {t["alertname"] for t in group.get("alert_rule_test", ()) if t["exp_alerts"]}
    assert alerts <= fired, alerts - fired


def test_critical_xid_alert_lists_the_health_evaluator_xids() -> None:
    """The alert and the agent's health check must call the same XIDs critical."""
    alerts = (RULES / "alerts.yml").read_text()
    lists = set(re.findall(r'xid=~"([0-9|]+)"', alerts))
    assert lists == {"|".join(str(x) for x in sorted(CRITICAL_XIDS))}
