"""The reader framework: typed answers checked in the guard, one failing reader costing only
its own fields, per-reader self-metrics, and the NVML call budget (field values batched,
administrator settings re-read once a minute)."""

from __future__ import annotations

import logging
from typing import Any

import pynvml
import pytest

from falcon_gpu.model.attribution import Attribution
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.snapshot import DeviceReading
from falcon_gpu.readings.device import READINGS as READINGS_TABLE
from falcon_gpu.schemas import falcon_gpu
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.sinks.encoding import prom_text
from falcon_gpu.sources.nvml import field_values
from falcon_gpu.sources.nvml import source as source_module
from falcon_gpu.sources.nvml.calls import NvmlCaller
from falcon_gpu.sources.nvml.readers import READERS, DeviceContext, Fields
from falcon_gpu.sources.nvml.readers.base import FIELD_TYPES
from tests.nvml.helpers import GIB, Quirky, expected_device, gpu, scenario_of, source_on

FULL = gpu(
    memory_total_bytes=40 * GIB, memory_used_bytes=5 * GIB, memory_reserved_bytes=GIB,
    utilization_gpu_percent=73, utilization_memory_percent=40, temperature_celsius=61,
    memory_temperature_celsius=70, slowdown_tlimit_celsius=-2, shutdown_tlimit_celsius=-8,
    power_watts=[250, 251], power_limit_watts=400,
    energy_joules=[1000, 1010, 1020], performance_state=0, sm_clock_mhz=1410, memory_clock_mhz=1215,
    fan_speed_percent=30, encoder_percent=4, decoder_percent=6, pcie_replays=[2, 3],
    ecc={"corrected_volatile": 1, "uncorrected_volatile": 0, "corrected_aggregate": [7, 8],
         "uncorrected_aggregate": 2},
    retired_pages={"single_bit": 2, "double_bit": 1, "pending": True},
    remapped_rows={"correctable": 3, "uncorrectable": 1, "pending": True, "failed": False},
    clock_event_reasons=["sw_power_cap"], inforom_valid=True,
    processes=[{"pid": 11, "name": "trainer", "type": "compute", "used_memory_bytes": GIB,
                "sm_util_percent": 40}],
)  # fmt: skip
THERMAL_POWER = {
    "temperature_celsius", "memory_temperature_celsius", "power_watts", "power_limit_watts",
    "energy_joules", "performance_state", "fan_speed_ratio", "slowdown_tlimit_celsius",
    "shutdown_tlimit_celsius",
}  # fmt: skip


def reading_fields(device: DeviceReading) -> dict[str, Any]:
    return {name: getattr(device, name) for name in device.__struct_fields__ if name in FIELD_TYPES}


def assert_matches_scenario(
    device: DeviceReading, sim: SimulatedNvml, cycle: int, *, without: set[str]
) -> None:
    want = expected_device(sim.scenario.gpus[0], cycle)
    for name, value in want.items():
        if name not in without:
            got = getattr(device, name)
            assert got == (pytest.approx(value) if isinstance(value, float) else value), name


def test_fields_names_every_reading_of_the_snapshot() -> None:
    by_source = {"index", "uuid", "name", "pci_bus_id", "up", "error", "minor_number", "xid_counts"}
    by_source.add("last_xid")
    assert set(FIELD_TYPES) == set(DeviceReading.__struct_fields__) - by_source


def _replace_reader(monkeypatch: pytest.MonkeyPatch, name: str, reader: Any) -> None:
    readers = tuple((n, reader if n == name else r) for n, r in READERS)
    monkeypatch.setattr(source_module, "READERS", readers)


@pytest.mark.parametrize(
    "faulty",
    [
        pytest.param(lambda ctx: 1 / 0, id="raises"),
        pytest.param(lambda ctx: {"power_wats": 1.0}, id="misspelt-key"),
        pytest.param(lambda ctx: {"power_watts": "250"}, id="wrong-type"),
    ],
)
def test_one_faulty_reader_costs_only_its_own_fields(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, faulty: Any
) -> None:
    _replace_reader(monkeypatch, "thermal_power", faulty)
    sim = SimulatedNvml(scenario_of(FULL, gpu("GPU-b", power_watts=9)))
    source, telemetry = source_on(sim)
    with caplog.at_level(logging.WARNING, logger="falcon_gpu"):
        for t in range(2):
            snap = source.collect(1000.0 + t)
    device = snap.devices[0]
    assert snap.nvml_ok and device.up and device.uuid == "GPU-a"
    for name in THERMAL_POWER:
        assert getattr(device, name) is None, name
    assert_matches_scenario(device, sim, 1, without=THERMAL_POWER)
    assert [p.pid for p in device.processes] == [11] and device.processes[0].sm_util_ratio == pytest.approx(
        0.4
    )
    assert snap.devices[1].up and snap.devices[1].power_watts is None  # the same reader, the other GPU
    view = telemetry.view()
    assert view.errors_total == {"nvml_field": 4}  # 2 GPUs x 2 cycles, one reader
    assert {name: ok for name, (ok, _) in view.readers.items()} == {
        name: name != "thermal_power" for name, _ in READERS
    }
    assert len([r for r in caplog.records if "thermal_power" in r.getMessage()]) == 2  # once per GPU


def test_reader_success_and_seconds_are_exported_per_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_clocks(ctx: DeviceContext) -> Fields:
        raise RuntimeError("boom")

    _replace_reader(monkeypatch, "clocks", broken_clocks)
    sim = SimulatedNvml(scenario_of(FULL))
    source, telemetry = source_on(sim)
    snap = source.collect(1000.0)
    cycle = CycleData("n1", 30, snap, Attribution(), {}, telemetry.view())
    text = prom_text.encode(falcon_gpu.render(cycle))
    success = {
        line.split('reader="')[1].split('"')[0]: line.rsplit(" ", 1)[1]
        for line in text.splitlines()
        if line.startswith("falcon_gpu_agent_reader_success{")
    }
    assert success == {name: "0" if name == "clocks" else "1" for name, _ in READERS}
    seconds = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("falcon_gpu_agent_reader_seconds{")
    ]
    assert len(seconds) == len(READERS) and all(0 <= s < 1 for s in seconds) and sum(seconds) > 0
    assert 'falcon_gpu_agent_reader_success{node="n1",reader="memory"} 1' in text


def test_a_reader_that_works_again_is_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broken = [True]

    def flaky(ctx: DeviceContext) -> Fields:
        if broken[0]:
            raise RuntimeError("boom")
        return {"encoder_utilization_ratio": 0.5}

    _replace_reader(monkeypatch, "utilization", flaky)
    source, telemetry = source_on(SimulatedNvml(scenario_of(FULL)))
    with caplog.at_level(logging.INFO, logger="falcon_gpu"):
        source.collect(1000.0)
        broken[0] = False
        for t in range(1, 4):
            device = source.collect(1000.0 + t).devices[0]
    assert device.encoder_utilization_ratio == 0.5 and device.utilization_ratio is None
    assert len([r for r in caplog.records if "works again" in r.getMessage()]) == 1
    assert telemetry.view().readers["utilization"][0] is True


def test_a_reader_gone_wrong_after_a_known_merged_shape_costs_only_its_fields(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The steady cycle checks the merged answer's shape only: a reader whose answer turns wrong after
    that shape is known must still be found, dropped alone, and said to work again once it is right."""
    wrong = [False]
    real = dict(READERS)["thermal_power"]

    def turning(ctx: DeviceContext) -> Fields:
        answer = real(ctx)
        return {"power_wats": 1.0} if wrong[0] else answer

    _replace_reader(monkeypatch, "thermal_power", turning)
    sim = SimulatedNvml(scenario_of(FULL))
    source, telemetry = source_on(sim)
    with caplog.at_level(logging.INFO, logger="falcon_gpu"):
        assert source.collect(1000.0).devices[0].power_watts is not None
        wrong[0] = True
        device = source.collect(1001.0).devices[0]
        for name in THERMAL_POWER:
            assert getattr(device, name) is None, name
        assert_matches_scenario(device, sim, 1, without=THERMAL_POWER)
        assert telemetry.view().readers["thermal_power"][0] is False
        assert telemetry.view().readers["memory"][0] is True
        wrong[0] = False
        device = source.collect(1002.0).devices[0]
    assert_matches_scenario(device, sim, 2, without=set())
    assert telemetry.view().errors_total == {"nvml_field": 1}
    assert telemetry.view().readers["thermal_power"][0] is True
    assert len([r for r in caplog.records if "thermal_power works again" in r.getMessage()]) == 1


def test_the_kept_device_context_starts_each_cycle_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """The source keeps one context per device and resets it: no cycle sees the last one's state."""
    seen: list[tuple[float, dict[str, object], object, object]] = []
    real = dict(READERS)["memory"]

    def watching(ctx: DeviceContext) -> Fields:
        if ctx.index == 0:
            seen.append((ctx.timestamp, dict(ctx.fields), ctx.samples, ctx.sm_by_pid))
        return real(ctx)

    _replace_reader(monkeypatch, "memory", watching)
    source, _ = source_on(SimulatedNvml(scenario_of(FULL)))
    for t in range(3):
        assert source.collect(1000.0 + t).devices[0].processes  # the process readers filled it
    assert seen == [(1000.0 + t, {}, None, {}) for t in range(3)]


PER_CYCLE = {
    "nvmlDeviceGetMemoryInfo": 1,
    "nvmlDeviceGetUtilizationRates": 1,
    "nvmlDeviceGetTemperature": 1,
    "nvmlDeviceGetFieldValues": 1,
    "nvmlDeviceGetPerformanceState": 1,
    "nvmlDeviceGetClockInfo": 1,
    "nvmlDeviceGetProcessUtilization": 1,
    "nvmlDeviceGetComputeRunningProcesses_v3": 1,
}
"""The NVML calls one GPU with every reading costs per cycle once identity, limits and MIG mode are
known, while its temperature, P-state and clocks hold, no limiter holds its clocks down, no process uses
the encoder or decoder and none has a graphics context: 8, down from 15 (the memory clock, fan, encoder,
decoder, MPS and graphics lists and the clock event reasons are asked when they may have changed:
tests/nvml/test_nvml_call_gates.py)."""
ENGINES = {"nvmlDeviceGetEncoderUtilization": 1, "nvmlDeviceGetDecoderUtilization": 1}
"""What a GPU whose processes use NVENC and NVDEC adds."""
THROTTLED = {"nvmlDeviceGetCurrentClocksEventReasons": 1}
"""What a GPU whose clocks a limiter holds down adds (the mask is asked every cycle while it lasts)."""


def _calls_per_gpu(gpu_a: dict[str, object]) -> tuple[dict[str, float], DeviceReading, SimulatedNvml]:
    sim = SimulatedNvml(scenario_of(gpu_a, gpu("GPU-b", **{k: v for k, v in gpu_a.items() if k != "uuid"})))
    source, _ = source_on(sim)
    source.collect(1000.0)
    before = dict(sim.calls)
    for t in range(1, 11):  # ten cycles within the minute
        snap = source.collect(1000.0 + t)
    per_gpu = {fn: (n - before.get(fn, 0)) / 10 / 2 for fn, n in sim.calls.items() if n != before.get(fn, 0)}
    assert per_gpu.pop("nvmlDeviceGetCount") == 0.5  # once per cycle for the node
    return per_gpu, snap.devices[0], sim


def test_nvml_calls_per_gpu_per_cycle() -> None:
    steady = {**FULL, "encoder_percent": 0, "decoder_percent": 0, "clock_event_reasons": []}
    per_gpu, device, sim = _calls_per_gpu(steady)
    assert per_gpu == PER_CYCLE
    assert sum(per_gpu.values()) == 8
    assert_matches_scenario(device, sim, 10, without=set())
    per_gpu, device, sim = _calls_per_gpu(FULL)  # encoder 4 %, decoder 6 %, SW power cap
    assert per_gpu == {**PER_CYCLE, **ENGINES, **THROTTLED}
    assert_matches_scenario(device, sim, 10, without=set())


def test_power_limit_inforom_and_mig_mode_are_read_once_a_minute() -> None:
    sim = SimulatedNvml(scenario_of(FULL))
    source, _ = source_on(sim)
    for t in range(0, 120, 10):  # 12 cycles over two minutes
        device = source.collect(1000.0 + t).devices[0]
        assert device.power_limit_watts == 400 and device.inforom_valid is True and not device.mig_enabled
    for fn in ("nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceValidateInforom", "nvmlDeviceGetMigMode"):
        assert sim.calls[fn] == 2, fn


FIELD_ONLY = {"memory_temperature_celsius": 70, "slowdown_tlimit_celsius": -2, "shutdown_tlimit_celsius": -8}
"""Readings NVML has only as field values (FULL's values)."""


def test_field_values_batch_matches_the_dedicated_calls_and_old_bindings_lose_nothing() -> None:
    batched = SimulatedNvml(scenario_of(FULL))
    old = SimulatedNvml(scenario_of(FULL))
    old_lib = Quirky(old, hide=("nvmlDeviceGetFieldValues",))
    src_new, tel_new = source_on(batched)
    src_old, tel_old = source_on(old_lib)
    for t in range(3):
        new_dev, old_dev = src_new.collect(1000.0 + t).devices[0], src_old.collect(1000.0 + t).devices[0]
        assert reading_fields(new_dev) == {**reading_fields(old_dev), **FIELD_ONLY}
        assert_matches_scenario(new_dev, batched, t, without=set(FIELD_ONLY))
    assert all(getattr(old_dev, name) is None for name in FIELD_ONLY)  # no function has them
    assert batched.calls["nvmlDeviceGetTotalEccErrors"] == 0 and batched.calls["nvmlDeviceGetPowerUsage"] == 0
    assert old.calls["nvmlDeviceGetTotalEccErrors"] == 12 and old.calls["nvmlDeviceGetPowerUsage"] == 3
    assert tel_new.view().errors_total == {} == tel_old.view().errors_total


def _field_answering(sim: SimulatedNvml, field_id: int, code: int, asked: list[list[int]]) -> Quirky:
    """The simulator, with ``field_id`` answering ``code`` inside a successful field-values call."""

    def field_values(handle: Any, ids: list[int]) -> Any:
        asked.append(list(ids))
        values = sim.nvmlDeviceGetFieldValues(handle, ids)
        for v in values:
            if v.fieldId == field_id:
                v.nvmlReturn = code
        return values

    return Quirky(sim, override={"nvmlDeviceGetFieldValues": field_values})


def test_a_field_an_old_driver_does_not_know_falls_back_to_its_own_call_alone() -> None:
    sim = SimulatedNvml(scenario_of(FULL))
    asked: list[list[int]] = []
    energy = pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION
    source, telemetry = source_on(_field_answering(sim, energy, pynvml.NVML_ERROR_INVALID_ARGUMENT, asked))
    energies = [source.collect(1000.0 + t).devices[0].energy_joules for t in range(3)]
    assert energies == [1000, 1010, 1020]
    assert sim.calls["nvmlDeviceGetTotalEnergyConsumption"] == 3
    assert energy in asked[0] and all(energy not in ids for ids in asked[1:])
    # asked[1]: the batch again, the per-link NVLink fields in place of the refused sums (this GPU has no
    # NVLink), energy already left out;
    # PCIe and NVLink drop out after the first cycle, as do the table's field-only readings where a
    # scenario lacks them (left out here, so that a reading added to the table needs no edit here)
    declared = {  # the table's generic field-only readings
        spec
        for r in READINGS_TABLE
        if r.nvml is not None and not r.nvml.hook and r.nvml.call is None
        for spec in field_values.TABLE_FIELDS[r.field]
    }
    plain = {
        s.request
        for s in field_values.FIELDS
        if not s.quiet and s not in field_values.PCIE_TRAFFIC and s not in declared
    }
    rest = [i for i in asked[0] if i in plain and i != energy]
    assert len(asked) == 4 and [i for i in asked[1] if i in plain] == rest
    assert [i for i in asked[2] if i in plain] == rest
    assert sim.calls["nvmlDeviceGetTotalEccErrors"] == 0  # the other fields stay batched
    assert telemetry.view().errors_total == {}


def test_a_field_failing_inside_the_batch_fails_its_reader_only() -> None:
    sim = SimulatedNvml(scenario_of(FULL))
    replays = pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER
    source, telemetry = source_on(_field_answering(sim, replays, pynvml.NVML_ERROR_UNKNOWN, []))
    device = source.collect(1000.0).devices[0]
    assert device.pcie_replays is None and device.ecc is not None and device.energy_joules == 1000
    assert telemetry.view().errors_total == {"nvml_field": 1}
    assert telemetry.view().readers["health"][0] is False and telemetry.view().readers["thermal_power"][0]


def test_not_supported_per_field_is_remembered_per_field() -> None:
    sim = SimulatedNvml(scenario_of({**FULL, "not_supported": ["ecc", "retired_pages"]}))
    source, telemetry = source_on(sim)
    for t in range(3):
        device = source.collect(1000.0 + t).devices[0]
        assert device.ecc is None and device.retired_pages is None
        assert device.remapped_rows is not None and device.pcie_replays is not None
    # ECC and retired pages: once in the batch, once by their own call (an older driver might
    # know them there), then never again; the batch goes on every cycle for the rest.
    assert sim.calls["nvmlDeviceGetTotalEccErrors"] == 4 and sim.calls["nvmlDeviceGetRetiredPages"] == 1
    assert sim.calls["nvmlDeviceGetFieldValues"] == 4  # + once the per-link NVLink fields (refused)
    assert telemetry.view().errors_total == {}


def test_reader_outcomes_are_absent_while_nvml_is_down() -> None:
    sim = SimulatedNvml(scenario_of(FULL))
    source, telemetry = source_on(sim)
    source.collect(1000.0)
    assert set(telemetry.view().readers) == {name for name, _ in READERS}
    sim.nvmlShutdown()  # NVML stops answering (UNINITIALIZED on every call)
    snap = source.collect(1001.0)
    assert not snap.nvml_ok and telemetry.view().readers == {}


@pytest.mark.parametrize(
    ("value_type", "member", "number"),
    [
        (pynvml.NVML_VALUE_TYPE_DOUBLE, "dVal", 2.5),
        (pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal", 4_000_000_000),
        (pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG, "ulVal", 1 << 40),
        (pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal", (1 << 63) + 5),
        (pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG, "sllVal", -7),
        (pynvml.NVML_VALUE_TYPE_SIGNED_INT, "siVal", -3),
        (pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT, "usVal", 65535),
    ],
)
def test_field_values_read_from_bytes_equal_the_struct_members(
    value_type: int, member: str, number: float
) -> None:
    values = (pynvml.c_nvmlFieldValue_t * 2)()
    values[0].valueType, values[0].nvmlReturn = value_type, pynvml.NVML_SUCCESS
    setattr(values[0].value, member, number)
    values[1].valueType, values[1].nvmlReturn = 99, pynvml.NVML_ERROR_NOT_SUPPORTED  # a type unknown here
    exact = (
        number if value_type == pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG else float(number)
    )  # counters: ints
    nvml = NvmlCaller(SimulatedNvml(scenario_of(FULL)))
    request = field_values.FieldValues(nvml)._build("GPU-a", field_values.FIELDS[:2])
    for _ in range(2):  # laid out anew, then by the layout kept
        numbers, odd = request.decode(values)
        assert numbers == [exact, None, None] and type(numbers[0]) is type(exact)
        assert odd == [(1, 99, pynvml.NVML_ERROR_NOT_SUPPORTED)]
