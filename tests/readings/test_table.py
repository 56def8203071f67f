"""The reading table agrees with the snapshot, the readers, the simulator's scenario format and the
schemas, so that a reading declared there is read, served, published and tested everywhere."""

from __future__ import annotations

import msgspec
import pytest

from falcon_gpu.model.snapshot import DeviceReading
from falcon_gpu.readings.device import BOARD, BY_FIELD, INTERCONNECT, READINGS
from falcon_gpu.readings.spec import SCHEMAS
from falcon_gpu.schemas import dcgm, falcon_gpu, nvidia_smi, openfalcon
from falcon_gpu.simulator.scenario.parse import NOT_SUPPORTED_NAMES, NUMERIC_KEYS, PCIE_KEYS
from falcon_gpu.sources.nvml.field_values import FIELDS, TABLE_FIELDS
from falcon_gpu.sources.nvml.readers import NEEDS, READERS, check_order
from falcon_gpu.sources.nvml.readers.base import FIELD_TYPES
from falcon_gpu.sources.nvml.readers.table import TableRows


def test_every_reading_is_a_device_reading_field_and_a_fields_key_of_its_type() -> None:
    hints = {f.name: f.type for f in msgspec.structs.fields(DeviceReading)}
    assert set(DeviceReading.__struct_fields__) >= set(BY_FIELD)
    for r in READINGS:
        assert hints[r.field] == r.type | None, r.field
        assert FIELD_TYPES[r.field] == ((r.type, int, type(None)) if r.type is float else (int, type(None)))


def test_fields_are_declared_once_and_every_reader_named_exists() -> None:
    assert len(BY_FIELD) == len(READINGS) == len(BOARD) + len(INTERCONNECT)
    readers = {name for name, _ in READERS}
    assert {r.reader for r in READINGS} <= readers


def test_each_schema_name_is_unique_and_in_the_schema_specs() -> None:
    specs = {"falcon_gpu": falcon_gpu.SPECS, "dcgm": dcgm.SPECS, "nvidia_smi": nvidia_smi.SPECS}
    for schema in SCHEMAS:
        names = [p.name for r in READINGS if (p := r.published(schema)) is not None]
        assert len(names) == len(set(names)), schema
        if schema in specs:
            declared = {s.name: s for s in specs[schema]}
            for r in READINGS:
                p = r.published(schema)
                if p is not None:
                    assert (declared[p.name].kind, declared[p.name].help) == (p.kind, p.help)
    assert set(openfalcon.BOARD_SERIES.names.values()) >= {"GPUUtils", "PowerUsed", "SmClock"}


def test_scenario_keys_are_the_contract_ones_and_switch_off_by_name() -> None:
    # CONTRACT section 6: these keys are public; the table must keep serving every one of them
    assert set(NUMERIC_KEYS) >= {
        "memory_total_bytes", "memory_used_bytes", "memory_reserved_bytes", "utilization_gpu_percent",
        "utilization_memory_percent", "temperature_celsius", "memory_temperature_celsius", "power_watts",
        "power_limit_watts", "energy_joules", "performance_state", "sm_clock_mhz", "memory_clock_mhz",
        "fan_speed_percent", "encoder_percent", "decoder_percent", "pcie_replays",
    }  # fmt: skip
    assert PCIE_KEYS == ("tx_bytes", "rx_bytes")
    assert {r.sim.support_name for r in READINGS if r.sim is not None} <= NOT_SUPPORTED_NAMES


def test_generic_rows_are_one_field_id_or_a_call_refreshed_as_declared() -> None:
    generic = [r for r in READINGS if r.nvml is not None and not r.nvml.hook]
    assert {r.field for r in generic} >= {"slowdown_tlimit_celsius", "temperature_celsius", "fan_speed_ratio"}
    for r in generic:
        assert r.nvml is not None and r.nvml.refresh.kind != "gated", r.field  # evidence needs a hook
        assert len(r.nvml.field_ids) == 1 or (not r.nvml.field_ids and r.nvml.call), r.field
        if r.nvml.refresh.kind == "follows":
            assert r.nvml.refresh.after in BY_FIELD, r.field
    assert {s for specs in TABLE_FIELDS.values() for s in specs} <= set(FIELDS)
    read = {name: TableRows(name) for name, _ in READERS}
    assert {f for rows in read.values() for c in rows.calls for f, _, _ in c.rows} | {
        f for rows in read.values() for f, _ in rows.convert
    } == {r.field for r in generic}


def test_a_reader_needing_a_reading_read_after_it_is_refused_at_import() -> None:
    check_order(READERS, NEEDS)
    late = tuple(sorted(READERS, key=lambda pair: pair[0] != "clocks"))  # clocks first: no P-state yet
    with pytest.raises(ValueError, match="reader clocks needs performance_state, which thermal_power"):
        check_order(late, NEEDS)
    assert "performance_state" in NEEDS["clocks"] and "utilization_ratio" in NEEDS["clocks"]


def test_a_derived_reading_says_how_and_a_read_one_says_where() -> None:
    for r in READINGS:
        assert (r.nvml is None) == (r.derived is not None), r.field
        assert r.doc and r.doc.endswith("."), r.field
