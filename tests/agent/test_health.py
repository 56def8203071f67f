"""Health rules: level checks and change-based checks (XID hold, rising PCIe replays)."""

from __future__ import annotations

from msgspec.structs import replace

from falcon_gpu.health import HealthEvaluator
from falcon_gpu.model.snapshot import RemappedRows, RetiredPages, Snapshot
from tests.schemas.fixtures import full_device, lost_device


def snap(ts: float, *devices: object) -> Snapshot:
    return Snapshot(timestamp=ts, nvml_ok=True, devices=devices)  # type: ignore[arg-type]


def test_xid_raises_check_for_hold_window_and_reports_interval_counts() -> None:
    ev = HealthEvaluator(xid_hold_seconds=100)
    d = replace(full_device(), xid_counts={})
    assert ev.evaluate(snap(0, d))["GPU-aaaa"].checks["xid"] == 0
    r = ev.evaluate(snap(10, replace(d, xid_counts={79: 1})))["GPU-aaaa"]
    assert r.checks["xid"] == 2 and r.xid_in_interval == {79: 1}
    r = ev.evaluate(snap(50, replace(d, xid_counts={79: 1})))["GPU-aaaa"]
    assert r.checks["xid"] == 2 and r.xid_in_interval == {} and r.last_xid == 79
    assert ev.evaluate(snap(111, replace(d, xid_counts={79: 1})))["GPU-aaaa"].checks["xid"] == 0
    r = ev.evaluate(snap(120, replace(d, xid_counts={79: 1, 13: 2})))["GPU-aaaa"]
    assert r.checks["xid"] == 1 and r.xid_in_interval == {13: 2}  # 13 (graphics engine) is a warning
    assert r.last_xid == 13


def test_level_checks() -> None:
    ev = HealthEvaluator()
    d = replace(
        full_device(),
        retired_pages=RetiredPages(30, 30, False),
        remapped_rows=RemappedRows(0, 1, False, True),
        clock_event_reasons=frozenset({"hw_thermal", "hw_slowdown"}),
        inforom_valid=False,
        xid_counts={},
    )
    checks = ev.evaluate(snap(0, d))["GPU-aaaa"].checks
    assert checks == {
        "lost": 0,
        "xid": 0,
        "ecc": 0,
        "retired_pages": 2,
        "remapped_rows": 2,
        "pcie": 0,
        "thermal": 2,
        "power": 1,
        "inforom": 1,
        "nvlink": 0,  # the fixture's NVLink has counted errors, but none since the previous cycle
    }


def test_pcie_replays_rising_warn_and_lost_fails() -> None:
    ev = HealthEvaluator()
    d = full_device()
    ev.evaluate(snap(0, d))
    checks = ev.evaluate(snap(1, replace(d, pcie_replays=9)))["GPU-aaaa"].checks
    assert checks["pcie"] == 1
    assert ev.evaluate(snap(2, replace(d, pcie_replays=9)))["GPU-aaaa"].checks["pcie"] == 0
    lost = ev.evaluate(snap(3, lost_device()))["GPU-cccc"]
    assert lost.checks == {"lost": 2, "xid": 0} and lost.overall == 2


def test_last_xid_is_the_most_recent_event_not_the_most_critical() -> None:
    ev = HealthEvaluator()
    d = replace(full_device(), xid_counts={})
    ev.evaluate(snap(0, d))
    r = ev.evaluate(snap(30, replace(d, xid_counts={79: 1, 13: 1}, last_xid=13)))["GPU-aaaa"]
    assert r.last_xid == 13 and r.checks["xid"] == 2  # 79 still fails the check
    r = ev.evaluate(snap(60, replace(d, xid_counts={79: 1, 13: 1, 31: 1})))["GPU-aaaa"]
    assert r.last_xid == 31  # no order from the source: the one new code


def test_harmless_xid_after_a_critical_one_keeps_the_check_failed_for_its_hold() -> None:
    ev = HealthEvaluator(xid_hold_seconds=100)
    d = replace(full_device(), xid_counts={})
    ev.evaluate(snap(0, d))
    assert ev.evaluate(snap(10, replace(d, xid_counts={79: 1})))["GPU-aaaa"].checks["xid"] == 2
    r = ev.evaluate(snap(70, replace(d, xid_counts={79: 1, 31: 1}, last_xid=31)))["GPU-aaaa"]
    assert r.checks["xid"] == 2 and r.last_xid == 31  # 79's hold runs until 110
    r = ev.evaluate(snap(115, replace(d, xid_counts={79: 1, 31: 1})))["GPU-aaaa"]
    assert r.checks["xid"] == 1  # 79's hold is over; 31's runs until 170
    assert ev.evaluate(snap(171, replace(d, xid_counts={79: 1, 31: 1})))["GPU-aaaa"].checks["xid"] == 0
