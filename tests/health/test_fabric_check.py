"""The ``fabric`` health check (health/fabric.py), from a simulated node through the NVML source:
fail while the GPU is not registered with its NVLink fabric or the fabric reports a degraded link or
route, pass once it is healthy, no check at all where the GPU has no fabric."""

from __future__ import annotations

from typing import Any

import pytest

from falcon_gpu.health import HealthEvaluator
from falcon_gpu.model.cycle import FAIL, PASS
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from tests.nvml.helpers import gpu, scenario_of, source_on

HEALTHY = {"state": "completed", "clique_id": 1, "cluster_uuid": "5c2b1a77-8f0e-4e47-9d6a-2f1f0b7c4e11"}


def checks_over(fabric: dict[str, Any] | None, times: range = range(0, 1, 1)) -> list[dict[str, int]]:
    extra = {} if fabric is None else {"fabric": fabric}
    sim = SimulatedNvml(scenario_of(gpu(power_watts=250, **extra)))
    source, _ = source_on(sim)
    evaluator = HealthEvaluator()
    return [evaluator.evaluate(source.collect(1000.0 + t))["GPU-a"].checks for t in times]


@pytest.mark.parametrize(
    ("fabric", "level"),
    [
        (HEALTHY, PASS),
        ({**HEALTHY, "state": "not_started"}, FAIL),
        ({**HEALTHY, "state": "in_progress"}, FAIL),
        ({**HEALTHY, "status": 3}, FAIL),  # completed, with an error: registration failed
        ({**HEALTHY, "health": {"degraded_bandwidth": True}}, FAIL),
        ({**HEALTHY, "health": {"route_unhealthy": True}}, FAIL),
        ({**HEALTHY, "health": {"route_recovery": True}}, FAIL),
        ({**HEALTHY, "health": {"access_timeout_recovery": True}}, FAIL),
        ({**HEALTHY, "health": {"incorrect_configuration": "incorrect_chassis_sn"}}, FAIL),
        ({**HEALTHY, "health": {"incorrect_configuration": "not_supported"}}, PASS),
    ],
)
def test_fabric_check_level(fabric: dict[str, Any], level: int) -> None:
    (checks,) = checks_over(fabric)
    assert checks["fabric"] == level


def test_no_fabric_no_check() -> None:
    (checks,) = checks_over(None)
    assert "fabric" not in checks and checks["lost"] == PASS


def test_the_check_clears_once_registration_completes() -> None:
    """Registered at 40 s (cycle 4 of 10 s cycles); seen at the next minute's read (60 s)."""
    fabric = {**HEALTHY, "state": ["in_progress"] * 4 + ["completed"]}
    levels = [c["fabric"] for c in checks_over(fabric, range(0, 90, 10))]
    assert levels == [FAIL] * 6 + [PASS] * 3
