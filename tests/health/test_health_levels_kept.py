"""The level checks of a GPU whose readings did not move are last cycle's (health/evaluator.py
``_levels_of``), and every way out of that shortcut gives what a fresh evaluator gives: a reading
that changes, a change-based check that fired (it does not fire again on the same readings), a GPU
lost and back, an XID whose hold runs out."""

from __future__ import annotations

from falcon_gpu.health import HealthEvaluator
from falcon_gpu.model.cycle import FAIL, PASS, WARN, HealthReport
from falcon_gpu.model.snapshot import DeviceReading, EccCounts, NvlinkErrors, Snapshot
from tests.schemas.fixtures import full_device
from tests.schemas.test_family_memo import replaced


def report_at(ev: HealthEvaluator, ts: float, dev: DeviceReading) -> HealthReport:
    return ev.evaluate(Snapshot(timestamp=ts, nvml_ok=True, devices=(dev,)))["GPU-aaaa"]


def fresh_checks(dev: DeviceReading, before: DeviceReading, ts: float) -> dict[str, int]:
    """What an evaluator that saw only ``before`` (at ts - 1) says of ``dev``: no kept levels."""
    ev = HealthEvaluator(xid_hold_seconds=100)
    report_at(ev, ts - 1, before)
    return report_at(ev, ts, dev).checks


def test_the_same_readings_keep_the_checks_and_each_change_shows() -> None:
    ev = HealthEvaluator(xid_hold_seconds=100)
    errors = NvlinkErrors(crc_flit=0, crc_data=0, replay=0, recovery=0)
    d = replaced(full_device(), xid_counts={}, pcie_replays=2, nvlink_errors=errors)
    first = report_at(ev, 0, d)
    assert first.checks["nvlink"] == PASS and first.checks["pcie"] == PASS
    assert report_at(ev, 1, d) is first, "the same records: the same report"
    # equal records that are new objects (a reader that builds them anew) keep the checks too
    same = replaced(d, ecc=EccCounts(0, 0, 3, 1), nvlink_errors=NvlinkErrors(0, 0, 0, 0))
    assert report_at(ev, 2, same) is first
    steps: list[tuple[DeviceReading, str, int]] = [
        (replaced(d, nvlink_errors=NvlinkErrors(0, 0, 0, 1)), "nvlink", FAIL),  # a recovery: fail...
        (replaced(d, nvlink_errors=NvlinkErrors(0, 0, 0, 1)), "nvlink", PASS),  # ...once, not again
        (replaced(d, nvlink_errors=NvlinkErrors(0, 0, 0, 1)), "nvlink", PASS),
        (replaced(d, nvlink_errors=NvlinkErrors(0, 0, 0, 1), pcie_replays=9), "pcie", WARN),
        (replaced(d, nvlink_errors=NvlinkErrors(0, 0, 0, 1), pcie_replays=9), "pcie", PASS),
        (
            replaced(
                d,
                nvlink_errors=NvlinkErrors(0, 0, 0, 1),
                pcie_replays=9,
                clock_event_reasons=frozenset({"hw_thermal"}),
            ),
            "thermal",
            FAIL,
        ),
        (
            replaced(d, nvlink_errors=NvlinkErrors(0, 0, 0, 1), pcie_replays=9, inforom_valid=False),
            "inforom",
            WARN,
        ),
    ]
    before = same
    for ts, (dev, check, level) in enumerate(steps, start=3):
        checks = report_at(ev, ts, dev).checks
        assert checks[check] == level, (ts, check, checks)
        assert checks == fresh_checks(dev, before, ts), ts
        before = dev


def test_a_gpu_lost_and_back_and_an_xid_that_runs_out() -> None:
    ev = HealthEvaluator(xid_hold_seconds=10)
    d = replaced(full_device(), xid_counts={}, pcie_replays=2)
    up = report_at(ev, 0, d)
    lost = report_at(ev, 1, replaced(d, up=False))
    assert lost.checks == {"lost": FAIL, "xid": PASS}
    back = report_at(ev, 2, d)
    assert back.checks == up.checks and back.checks["lost"] == PASS and "ecc" in back.checks
    xid = report_at(ev, 3, replaced(d, xid_counts={79: 1}))
    assert xid.checks["xid"] == FAIL
    held = report_at(ev, 4, replaced(d, xid_counts={79: 1}))
    assert held.checks["xid"] == FAIL and report_at(ev, 5, replaced(d, xid_counts={79: 1})) is held
    gone = report_at(ev, 14, replaced(d, xid_counts={79: 1}))
    assert gone.checks == up.checks and gone.last_xid == 79
