"""Field groups (issue 9, the readers' own cost; issue 23, one accessor): one look-up gives a reader all
its batch numbers, a field the GPU is not asked being None in it, a field read by its dedicated call
that call's answer."""

from __future__ import annotations

import pynvml

from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.sources.nvml.field_values import (
    ENERGY,
    MEMORY_TEMP,
    POWER_AVERAGE,
    FieldBatch,
    FieldGroup,
)
from falcon_gpu.sources.nvml.readers import interconnect, thermal_power
from tests.nvml.helpers import gpu, scenario_of, source_on
from tests.nvml.test_nvml_readers import FULL, _field_answering

_OWN = FieldGroup((MEMORY_TEMP, POWER_AVERAGE, ENERGY))


def _batch_after(sim: SimulatedNvml, cycles: int) -> FieldBatch:
    """A fresh batch of the first GPU after ``cycles`` cycles (the request learnt)."""
    source, _ = source_on(sim)
    for t in range(cycles):
        source.collect(1000.0 + t)
    scope = source.collect(1000.0 + cycles).devices[0].uuid
    return source._field_values.batch(scope, sim.nvmlDeviceGetHandleByIndex(0))


def test_a_partial_group_gives_none_for_a_field_the_gpu_is_not_asked() -> None:
    # power_watts is not supported: POWER_AVERAGE (and POWER_INSTANT) drop out of the request
    old = gpu(
        temperature_celsius=40, memory_temperature_celsius=61, energy_joules=5, not_supported=["power_watts"]
    )
    batch = _batch_after(SimulatedNvml(scenario_of(old)), 2)
    assert batch.values(_OWN) == (61.0, None, 5000)
    full = _batch_after(SimulatedNvml(scenario_of(FULL)), 2)
    assert full.values(_OWN) == (70.0, 251_000.0, 1_020_000)  # mW and mJ, as NVML answers


def test_a_field_read_by_its_own_call_is_that_call_s_answer_in_its_group() -> None:
    sim = SimulatedNvml(scenario_of(FULL))
    energy = pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION
    lib = _field_answering(sim, energy, pynvml.NVML_ERROR_NOT_SUPPORTED, [])
    source, telemetry = source_on(lib)
    devices = [source.collect(1000.0 + t).devices[0] for t in range(3)]
    batch = source._field_values.batch(devices[0].uuid, lib.nvmlDeviceGetHandleByIndex(0))
    values = batch.values(_OWN)  # energy by its own call
    assert values[0] == 70.0 and values[2] == 1_020_000  # mJ, as NVML answers
    assert 1_020_000 in batch.values(thermal_power.TABLE.group)  # the generic reader's group too
    assert [d.energy_joules for d in devices] == [1000.0, 1010.0, 1020.0]
    assert sim.calls["nvmlDeviceGetTotalEnergyConsumption"] == 4  # 3 cycles + the look-up above
    assert devices[-1].memory_temperature_celsius == 70.0 and devices[-1].power_watts
    assert telemetry.view().errors_total == {}


def test_the_interconnect_aggregates_are_one_look_up_on_a_gpu_without_nvlink() -> None:
    sim = SimulatedNvml(scenario_of(gpu(pcie={"tx_bytes": [1000, 3000, 6000], "rx_bytes": 2})))
    source, _ = source_on(sim)
    devices = [source.collect(1000.0 + 10 * t).devices[0] for t in range(3)]
    batch = source._field_values.batch(devices[0].uuid, sim.nvmlDeviceGetHandleByIndex(0))
    assert batch.values(interconnect._AGGREGATE_GROUP) == (6000, 2, None, None, None, None, None, None)
    assert not batch.any_asked("nvlink", interconnect.NVLINK)  # kept with the request's decoder
    assert [d.pcie_tx_bytes_per_second for d in devices] == [None, 200.0, 300.0]
    assert devices[-1].nvlink_errors is None and devices[-1].nvlink_tx_bytes is None


def test_a_lost_gpu_s_field_value_state_goes_with_it() -> None:
    """What the source keeps per device for its field values (the request, the fields read by their own
    call) is dropped when the GPU stops answering: bounded by the GPUs there are."""
    sim = SimulatedNvml(scenario_of(gpu(memory_temperature_celsius=60, lost_at_cycle=2), gpu("GPU-b")))
    source, _ = source_on(sim)
    source.collect(1000.0)
    kept = source._field_values._asked
    assert set(kept) == {"GPU-a", "GPU-b"}
    source.collect(1001.0)
    assert source.collect(1002.0).devices[0].up is False
    assert set(kept) == {"GPU-b"}
