"""The health evaluator hands the same report out again while nothing it checks moved (so the schema
finds the health series unchanged by identity), and a new one the cycle anything does."""

from __future__ import annotations

from falcon_gpu.health import HealthEvaluator
from falcon_gpu.model.cycle import FAIL, PASS, WARN, HealthReport
from falcon_gpu.model.snapshot import DeviceReading, EccCounts, Snapshot
from tests.schemas.fixtures import full_device
from tests.schemas.test_family_memo import replaced


def report_at(ev: HealthEvaluator, ts: float, dev: DeviceReading) -> HealthReport:
    return ev.evaluate(Snapshot(timestamp=ts, nvml_ok=True, devices=(dev,)))["GPU-aaaa"]


def test_an_unchanged_gpu_gets_the_same_report_and_a_change_a_new_one() -> None:
    ev = HealthEvaluator(xid_hold_seconds=100)
    steady = replaced(full_device(), xid_counts={}, pcie_replays=2)
    first = report_at(ev, 0, steady)
    assert report_at(ev, 1, replaced(steady, ecc=EccCounts(0, 0, 3, 1))) is first, "equal inputs"
    broken = report_at(ev, 2, replaced(steady, ecc=EccCounts(0, 1, 3, 1)))
    assert broken is not first and broken.checks["ecc"] == FAIL
    healed = report_at(ev, 3, steady)
    assert healed.checks == first.checks
    assert report_at(ev, 4, steady) is healed


def test_change_based_checks_fall_back_and_xids_are_reported_once() -> None:
    ev = HealthEvaluator(xid_hold_seconds=100)
    d = replaced(full_device(), xid_counts={}, pcie_replays=2)
    report_at(ev, 0, d)
    rising = report_at(ev, 1, replaced(d, pcie_replays=5))
    assert rising.checks["pcie"] == WARN
    held = report_at(ev, 2, replaced(d, pcie_replays=5))
    assert held is not rising and held.checks["pcie"] == PASS
    xid = report_at(ev, 3, replaced(d, pcie_replays=5, xid_counts={79: 1}))
    assert xid.xid_in_interval == {79: 1} and xid.checks["xid"] == FAIL
    after = report_at(ev, 4, replaced(d, pcie_replays=5, xid_counts={79: 1}))
    assert after is not xid and after.xid_in_interval == {} and after.checks["xid"] == FAIL
    assert report_at(ev, 5, replaced(d, pcie_replays=5, xid_counts={79: 1})) is after
    expired = report_at(ev, 104, replaced(d, pcie_replays=5, xid_counts={79: 1}))
    assert expired is not after and expired.checks["xid"] == PASS and expired.last_xid == 79
