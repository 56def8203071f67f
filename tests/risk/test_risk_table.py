"""The risk table, its rules and doctor's computation agree: one declaration, two readers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from falcon_gpu.health.evaluator import CRITICAL_XIDS
from falcon_gpu.model.snapshot import (
    DeviceReading,
    EccCounts,
    NvlinkErrors,
    RemappedRows,
    RetiredPages,
    Snapshot,
)
from falcon_gpu.risk import REASONS, RiskHistory
from falcon_gpu.risk.rules import REASON_SERIES
from falcon_gpu.risk.table import DRAIN_AT, PRECURSOR_XIDS

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "conf" / "prometheus"


def test_the_committed_rules_are_what_the_table_writes() -> None:
    answer = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_answer_rules.py"), "--check"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr


def test_one_rule_per_reason_with_the_tables_weight() -> None:
    groups = yaml.safe_load((RULES / "recording.yml").read_text())["groups"]
    (group,) = [g for g in groups if g["name"] == "falcon_gpu_risk"]
    rules = {r["labels"]["reason"]: r["expr"] for r in group["rules"] if r["record"] == REASON_SERIES}
    assert list(rules) == [r.name for r in REASONS]
    for reason in REASONS:
        assert rules[reason.name].startswith(f"{reason.weight:g} * clamp_max(")


def test_the_alert_drains_at_the_tables_level() -> None:
    alerts = (RULES / "alerts.yml").read_text()
    assert re.findall(r"gpu:falcon_gpu_risk_score:ratio >= ([0-9.]+)", alerts) == [str(DRAIN_AT)]


def test_precursor_xids_are_critical_ones() -> None:
    assert set(PRECURSOR_XIDS) <= CRITICAL_XIDS


def _gpu(corrected: int = 0, xids: dict[int, int] | None = None, failed: bool = False) -> DeviceReading:
    return DeviceReading(
        index=0, uuid="GPU-a", name="H100", pci_bus_id="0", ecc=EccCounts(corrected_volatile=corrected),
        remapped_rows=RemappedRows(0, 0, False, failed), xid_counts=xids or {},
    )  # fmt: skip


def _history(gpus: list[DeviceReading], step: float = 60.0) -> RiskHistory:
    history = RiskHistory()
    for n, dev in enumerate(gpus):
        history.add(Snapshot(timestamp=n * step, nvml_ok=True, devices=(dev,)))
    return history


def test_doctor_scores_as_the_rules_do() -> None:
    """The figures of conf/prometheus/tests/risk_test.yml, from readings instead of series."""
    climbing = _history([_gpu(corrected=n) for n in range(31)]).report("GPU-a")
    assert (climbing.score, climbing.reasons) == (0.5, (("ecc_corrected_rate", 0.5),))
    one_xid = _history([_gpu()] * 10 + [_gpu(xids={79: 1})] * 20).report("GPU-a")
    assert one_xid.score == pytest.approx(0.5 / 3)
    harmless = _history([_gpu(xids={13: 5})] * 3).report("GPU-a")
    assert harmless.score == 0.0
    failed = _history([_gpu(failed=True)]).report("GPU-a")
    assert failed.score == 1.0 and failed.text() == "risk 1.00: row_remap_failure 1.00"


def test_old_xids_and_old_errors_leave_the_score() -> None:
    """Three XID 94 on the first day, then two quiet days: 0, as in the promtool test."""
    days = [_gpu(xids={94: 3})] * 49
    assert _history(days, step=3600.0).report("GPU-a").score == 0.0
    counted = [_gpu(xids={94: 3})] * 12
    assert _history(counted, step=3600.0).report("GPU-a").score == 0.5
    # the counter restarted (an agent restart): the new count is what it gained
    assert _history([_gpu(corrected=50), _gpu(corrected=4)]).report("GPU-a").reasons == (
        ("ecc_corrected_rate", 0.2),
    )


def test_history_is_bounded() -> None:
    history = RiskHistory(max_samples=3, max_gpus=1)
    for n in range(10):
        devs = (_gpu(corrected=n), DeviceReading(index=1, uuid="GPU-b", name="H100", pci_bus_id="1"))
        history.add(Snapshot(timestamp=float(n), nvml_ok=True, devices=devs))
    assert history.report("GPU-a").reasons == (("ecc_corrected_rate", 0.1),)  # the last 3 samples: 7, 8, 9
    assert history.report("GPU-b").score == 0.0


def test_throttling_links_and_pages_as_the_rules_weigh_them() -> None:
    """GPU-5, -6 and -7 of conf/prometheus/tests/risk_test.yml, from readings."""
    hot = [
        DeviceReading(
            index=0, uuid="GPU-a", name="H100", pci_bus_id="0",
            clock_event_reasons=frozenset({"hw_thermal" if n <= 30 else "sw_power_cap"}),
        )
        for n in range(61)
    ]  # fmt: skip
    assert _history(hot).report("GPU-a").reasons == (("throttled", 0.3 * 30 * 60 / 3600),)
    links = [
        DeviceReading(
            index=0, uuid="GPU-a", name="H100", pci_bus_id="0",
            nvlink_errors=NvlinkErrors(replay=n, crc_flit=0), pcie_replays=2 * n,
        )
        for n in range(61)
    ]  # fmt: skip
    assert dict(_history(links).report("GPU-a").reasons) == pytest.approx(
        {"nvlink_error_rate": 0.18, "pcie_replay_rate": 0.2}
    )
    pages = DeviceReading(
        index=0, uuid="GPU-a", name="H100", pci_bus_id="0", retired_pages=RetiredPages(30, 0, True)
    )
    assert _history([pages]).report("GPU-a").score == 0.5
