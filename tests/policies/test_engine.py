"""Each policy condition fires after ``for``, resolves after ``hold_down``, on the real cycle of the
policy-node scenario (one cycle a second, on a clock the test drives)."""

from __future__ import annotations

from pathlib import Path

from tests.policies.helpers import FLAPPY, HOT, policy_run, violation


def timeline(
    tmp_path: Path, policy: dict[str, object], uuid: str, cycles: int = 12
) -> list[tuple[float, float] | None]:
    with policy_run(tmp_path, policy) as run:
        return [violation(run.cycle(float(c)), str(policy["name"]), uuid) for c in range(cycles)]


def firing(tl: list[tuple[float, float] | None]) -> list[int]:
    return [i for i, v in enumerate(tl) if v is not None and v[0] == 1]


def test_temperature_fires_after_for_and_resolves_after_hold_down(tmp_path: Path) -> None:
    tl = timeline(tmp_path, {"name": "hot", "temperature_above": 90, "for": 2, "hold_down": 2}, HOT)
    # hot in cycles 2-7: pending from 2, fires at 4; clear from 8, resolved at 10
    assert firing(tl) == [4, 5, 6, 7, 8, 9]
    assert tl[3] == (0, 0) and tl[4] == (1, 1) and tl[11] == (0, 1)


def test_a_flapping_sensor_fires_once(tmp_path: Path) -> None:
    tl = timeline(tmp_path, {"name": "flap", "temperature_above": 90, "hold_down": 3}, FLAPPY)
    assert firing(tl) == list(range(1, 9))  # hot at 1, 3, 5; clear for 3 s from 6: resolved at 9
    assert tl[-1] == (0, 1)


def test_without_hold_down_the_same_sensor_fires_three_times(tmp_path: Path) -> None:
    tl = timeline(tmp_path, {"name": "flap", "temperature_above": 90, "hold_down": 0}, FLAPPY)
    assert firing(tl) == [1, 3, 5] and tl[-1] == (0, 3)


def test_a_condition_shorter_than_for_never_fires(tmp_path: Path) -> None:
    tl = timeline(tmp_path, {"name": "flap", "temperature_above": 90, "for": 1.5}, FLAPPY)
    assert firing(tl) == [] and tl[-1] == (0, 0)


def test_power_ecc_xid_and_pcie_replays(tmp_path: Path) -> None:
    assert firing(timeline(tmp_path, {"name": "p", "power_above": 700, "hold_down": 0}, FLAPPY)) == [
        3,
        4,
        5,
        6,
    ]
    assert firing(timeline(tmp_path, {"name": "e", "ecc_uncorrected": True, "hold_down": 0}, HOT)) == [
        4,
        5,
        6,
    ]
    # an XID is an event: it holds in the cycle it arrived (3), clear from 4, resolved 2 s later
    assert firing(timeline(tmp_path, {"name": "x", "xid": [79], "hold_down": 2}, HOT)) == [3, 4, 5]
    assert firing(timeline(tmp_path, {"name": "x", "xid": [13, 31], "hold_down": 2}, HOT)) == []
    # +50 replays a second = 3000 a minute; the first reading has no rate yet
    tl = timeline(tmp_path, {"name": "r", "pcie_replays_per_minute_above": 1000, "hold_down": 0}, FLAPPY)
    assert firing(tl) == [3, 4, 5, 6]


def test_health_fail_and_gpu_selection(tmp_path: Path) -> None:
    tl = timeline(tmp_path, {"name": "h", "health_fail": ["xid", "ecc"], "hold_down": 0}, HOT, cycles=8)
    assert firing(tl) == [3, 4, 5, 6, 7]  # XID 79 holds the xid check failed for 5 minutes
    policy = {"name": "only1", "temperature_above": 90, "gpus": ["1"]}
    assert set(timeline(tmp_path, policy, HOT, cycles=3)) == {None}  # GPU 0 is not watched: no series
    policy = {"name": "by-model", "temperature_above": 90, "gpus": ["NVIDIA H100*"], "hold_down": 0}
    assert firing(timeline(tmp_path, policy, HOT)) == [2, 3, 4, 5, 6, 7]


def test_the_alert_names_the_gpu_and_its_pod(tmp_path: Path) -> None:
    with policy_run(
        tmp_path, {"name": "hot", "temperature_above": 90, "severity": "critical", "hold_down": 0}
    ) as run:
        for c in range(10):
            run.cycle(float(c))
    fired = [a for a in run.recorder.alerts if a.ends_at is None]
    resolved = [a for a in run.recorder.alerts if a.ends_at is not None]
    assert len(fired) == 4 and len(resolved) == 4  # GPU 0 hot at 2-7; GPU 1 at 1, 3 and 5 (no hold-down)
    alert = next(a for a in fired if dict(a.labels)["uuid"] == HOT)
    assert dict(alert.labels) == {
        "alertname": "hot",
        "policy": "hot",
        "severity": "critical",
        "node": "policy-node",
        "gpu": "0",
        "uuid": HOT,
        "model": "NVIDIA H100 80GB HBM3",
        "namespace": "ml",
        "pod": "trainer-0",
    }
    assert alert.starts_at == 2.0 and "91" in alert.summary and "ml/trainer-0" in alert.summary
    (hot_end,) = [a for a in resolved if dict(a.labels)["uuid"] == HOT]
    assert hot_end.ends_at == 8.0 and hot_end.labels == alert.labels


def test_for_and_hold_down_run_on_the_monotonic_clock_across_a_wall_clock_step(tmp_path: Path) -> None:
    """Issue 19: the wall clock steps forward an hour after cycle 2, back two hours after cycle 8. The
    alert still fires after ``for`` (not at once) and resolves after ``hold_down``; its times are
    wall-clock times, its start on the clock of the moment it fired."""
    policy = {"name": "hot", "temperature_above": 90, "for": 2, "hold_down": 2}
    steps = [0.0] * 3 + [3600.0] * 6 + [-3600.0] * 3
    with policy_run(tmp_path, policy) as run:
        tl = [violation(run.cycle(float(c), wall_step=steps[c]), "hot", HOT) for c in range(12)]
        fired, resolved = run.recorder.alerts
    assert firing(tl) == [4, 5, 6, 7, 8, 9]  # as without a step
    assert fired.starts_at == 3600 + 2 and fired.ends_at is None
    assert resolved.ends_at == 10 - 3600 and resolved.starts_at == fired.starts_at
