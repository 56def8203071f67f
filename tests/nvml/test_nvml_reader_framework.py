"""The reader framework's cheap paths and what they fall back to: the snapshot built by position from
the merged answer, the per-device state kept across cycles, and answers the guard must still catch."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from falcon_gpu.model.snapshot import DeviceReading, EccCounts, MigReading, ProcessReading
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.sources.nvml import source as source_module
from falcon_gpu.sources.nvml.readers import READERS
from falcon_gpu.sources.nvml.readers.base import FIELD_TYPES
from tests.nvml.helpers import GIB, gpu, scenario_of, source_on

READINGS: dict[str, Any] = {
    "memory_total_bytes": 40 * GIB, "memory_used_bytes": GIB, "memory_free_bytes": 39 * GIB,
    "memory_reserved_bytes": 0, "utilization_ratio": 0.5, "memory_utilization_ratio": 0.25,
    "temperature_celsius": 61.0, "memory_temperature_celsius": 70.0, "slowdown_tlimit_celsius": -2.0,
    "shutdown_tlimit_celsius": -8.0, "power_watts": 250.0, "power_limit_watts": 400.0,
    "energy_joules": 1000.0, "performance_state": 0, "sm_clock_hertz": 1.41e9, "memory_clock_hertz": 1.2e9,
    "fan_speed_ratio": 0.3, "encoder_utilization_ratio": 0.04, "decoder_utilization_ratio": 0.06,
    "pcie_replays": 2, "ecc": EccCounts(1, 0, 7, 2), "retired_pages": None, "remapped_rows": None,
    "clock_event_reasons": frozenset({"idle"}), "inforom_valid": True, "gpm": None, "pcie_tx_bytes": 5,
    "pcie_rx_bytes": 6, "pcie_tx_bytes_per_second": 1.5, "pcie_rx_bytes_per_second": 2.5,
    "nvlink_tx_bytes": 7, "nvlink_rx_bytes": 8, "nvlink_errors": None, "nvlink": (),
    "nvlink_tx_bytes_per_second": 3.5, "nvlink_rx_bytes_per_second": 4.5, "mig_enabled": True,
    "mig": (MigReading(1, 0, "1g.10gb", "MIG-a"),), "processes": (ProcessReading(11, "trainer"),),
}  # fmt: skip
"""A value for every reading field (not the defaults, so a value landing in the wrong slot shows)."""


def test_the_positional_constructor_equals_the_keyword_one() -> None:
    """``of_readings`` passes every reading by position in ``_fields`` order: every reading field, in
    any subset, lands where ``DeviceReading(**readings)`` puts it, and a missing one takes its default."""
    assert set(READINGS) == set(FIELD_TYPES)
    for readings in (READINGS, {}, {"power_watts": 1.0, "mig_enabled": True, "processes": ()}):
        fast = DeviceReading.of_readings(3, "GPU-a", "A100", "0:1", 4, {13: 2}, 13, readings)
        slow = DeviceReading(3, "GPU-a", "A100", "0:1", minor_number=4, xid_counts={13: 2}, last_xid=13,
                             **readings)  # fmt: skip
        assert fast == slow and fast._asdict() == slow._asdict()
    blank = DeviceReading.of_readings(0, "", "", "", None, None, None, {})
    assert blank.up and blank.error is None and blank.xid_counts == {} and blank.mig_enabled is False
    assert blank.xid_counts is not DeviceReading.of_readings(0, "", "", "", None, None, None, {}).xid_counts


def test_a_reader_answering_no_mapping_costs_only_its_own_fields(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An answer the merge itself refuses (not a mapping) is that reader's failure, like a raise."""
    readers = tuple((n, (lambda ctx: 42) if n == "clocks" else r) for n, r in READERS)
    monkeypatch.setattr(source_module, "READERS", readers)
    source, telemetry = source_on(SimulatedNvml(scenario_of(gpu(sm_clock_mhz=1410, power_watts=250))))
    with caplog.at_level(logging.WARNING, logger="falcon_gpu"):
        devices = [source.collect(1000.0 + t).devices[0] for t in range(2)]
    assert all(d.up and d.sm_clock_hertz is None and d.power_watts == 250 for d in devices)
    assert telemetry.view().errors_total == {"nvml_field": 2}
    assert {name for name, (ok, _) in telemetry.view().readers.items() if not ok} == {"clocks"}
    assert [r.getMessage() for r in caplog.records if "clocks" in r.getMessage()] == [
        "GPU 0 (GPU-a): reading clocks: TypeError: 'int' object is not iterable"
    ]
