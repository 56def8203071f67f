"""The fabric reader on the simulator: what the scenario's ``fabric`` key says, asked once a minute,
absent where NVML has no fabric, and every refusal an answer rather than an error."""

from __future__ import annotations

import ctypes
from typing import Any

import pynvml
import pytest

from falcon_gpu.model.fabric import FabricReading
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.simulator.scenario.parse import ScenarioError, parse_scenario
from tests.nvml.helpers import Quirky, expected_fabric, gpu, raising, scenario_of, source_on

UUID = "5c2b1a77-8f0e-4e47-9d6a-2f1f0b7c4e11"
HEALTHY = {"state": "completed", "clique_id": 4, "cluster_uuid": UUID}
FUNCTION = "nvmlDeviceGetGpuFabricInfoV"


def fabric_of(sim: Any, t: float = 1000.0) -> FabricReading | None:
    source, telemetry = source_on(sim)
    device = source.collect(t).devices[0]
    assert telemetry.view().readers["fabric"][0] is True
    return device.fabric


def test_a_healthy_fabric_as_the_scenario_says() -> None:
    sim = SimulatedNvml(scenario_of(gpu(fabric=HEALTHY)))
    fabric = fabric_of(sim)
    assert fabric == expected_fabric(sim.scenario.gpus[0], 0)
    assert fabric is not None and fabric.registered and not fabric.faults
    assert (fabric.state, fabric.status, fabric.clique_id, fabric.cluster_uuid) == (3, 0, 4, UUID)
    assert fabric.health_mask == 0x1AA  # every condition FALSE, configuration "none": NVML's healthy mask


def test_conditions_and_configuration_in_the_mask() -> None:
    health = {
        "degraded_bandwidth": True,
        "access_timeout_recovery": True,
        "incorrect_configuration": "no_partition",
    }
    sim = SimulatedNvml(scenario_of(gpu(fabric={**HEALTHY, "status": 7, "health": health})))
    fabric = fabric_of(sim)
    assert fabric == expected_fabric(sim.scenario.gpus[0], 0)
    assert fabric is not None
    assert (
        fabric.health_mask == 0b0100_01_10_10_01
    )  # config 4, timeout TRUE, unhealthy/recovery FALSE, bw TRUE
    assert set(fabric.faults) == {"degraded_bandwidth", "access_timeout_recovery", "incorrect_configuration"}
    assert not fabric.registered  # completed with an error status


@pytest.mark.parametrize("gpu_extra", [{}, {"fabric": HEALTHY, "not_supported": ["fabric"]}])
def test_no_fabric_no_reading_and_not_asked_again(gpu_extra: dict[str, Any]) -> None:
    sim = SimulatedNvml(scenario_of(gpu(**gpu_extra)))
    source, _ = source_on(sim)
    for t in range(0, 200, 30):
        assert source.collect(1000.0 + t).devices[0].fabric is None
    assert sim.calls[FUNCTION] == 1


def test_state_not_supported_with_success_is_no_fabric() -> None:
    assert fabric_of(SimulatedNvml(scenario_of(gpu(fabric={**HEALTHY, "state": "not_supported"})))) is None


def test_asked_once_a_minute_and_a_change_seen_within_it() -> None:
    sim = SimulatedNvml(scenario_of(gpu(fabric={**HEALTHY, "state": ["in_progress"] * 4 + ["completed"]})))
    source, _ = source_on(sim)
    states = [source.collect(1000.0 + 15 * c).devices[0].fabric for c in range(9)]  # two minutes
    assert [f.state if f else None for f in states] == [2, 2, 2, 2, 3, 3, 3, 3, 3]
    assert sim.calls[FUNCTION] == 3  # at 0 s, 60 s and 120 s


@pytest.mark.parametrize(
    ("code", "errors"),
    [(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH, 0), (pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, 0),
     (pynvml.NVML_ERROR_UNKNOWN, 1)],
)  # fmt: skip
def test_refusals(code: int, errors: int) -> None:
    """An old driver (no such function, another struct version): no reading and no error, not asked
    again; an unexpected failure: counted, the rest of the GPU read."""
    sim = SimulatedNvml(scenario_of(gpu(fabric=HEALTHY, power_watts=250)))
    lib = Quirky(sim, override={FUNCTION: raising(code)})
    source, telemetry = source_on(lib)
    for t in (0, 61, 122):
        device = source.collect(1000.0 + t).devices[0]
        assert device.fabric is None and device.power_watts == 250
    assert lib.calls[FUNCTION] == (3 if errors else 1)
    assert telemetry.view().readers["fabric"][0] is not bool(errors)


def test_the_simulator_fills_pynvmls_struct_by_pointer_only() -> None:
    sim = SimulatedNvml(scenario_of(gpu(fabric=HEALTHY)))
    sim.nvmlInit()
    sim.nvmlDeviceGetCount()
    handle = sim.nvmlDeviceGetHandleByIndex(0)
    info = pynvml.c_nvmlGpuFabricInfo_v3_t()
    assert sim.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.pointer(info)) == pynvml.NVML_SUCCESS
    assert (info.state, info.cliqueId, info.healthMask) == (3, 4, 0x1AA)
    with pytest.raises(pynvml.NVMLError) as refused:
        sim.nvmlDeviceGetGpuFabricInfoV(handle, info)
    assert refused.value.value == pynvml.NVML_ERROR_INVALID_ARGUMENT
    old = pynvml.c_nvmlGpuFabricInfo_v2_t()
    old.version = 1
    with pytest.raises(pynvml.NVMLError) as refused:
        sim.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.pointer(old))
    assert refused.value.value == pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH


@pytest.mark.parametrize(
    ("fabric", "message"),
    [
        ({"state": "done"}, "gpus[0].fabric.state: expected one of"),
        ({"cluster_uuid": "xyz"}, "gpus[0].fabric.cluster_uuid: expected a UUID"),
        ({"health": {"incorrect_configuration": "bad"}}, "gpus[0].fabric.health.incorrect_configuration"),
        ({"health": {"degraded": True}}, "gpus[0].fabric.health.degraded: unknown key"),
        ({"clique": 1}, "gpus[0].fabric.clique: unknown key"),
    ],
)
def test_scenario_errors_name_the_path(fabric: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_scenario({"gpus": [gpu(fabric=fabric)]})
