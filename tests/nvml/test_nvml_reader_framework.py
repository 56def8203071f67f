"""The reader framework's cheap paths and what they fall back to: the snapshot built by position from
the merged answer, the per-device state kept across cycles, and answers the guard must still catch."""

from __future__ import annotations

import logging
from typing import Any

import pynvml
import pytest
from msgspec.structs import asdict

from falcon_gpu.model.fabric import FabricReading
from falcon_gpu.model.snapshot import DeviceReading, EccCounts, MigReading, ProcessReading
from falcon_gpu.readings.device import READINGS as TABLE
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.sources.nvml import source as source_module
from falcon_gpu.sources.nvml.calls import ABSENT, NvmlCaller, Variant
from falcon_gpu.sources.nvml.readers import READERS, check_fields
from falcon_gpu.sources.nvml.readers.base import FIELD_TYPES
from tests.nvml.helpers import gpu, scenario_of, source_on

STRUCTURED: dict[str, Any] = {
    "ecc": EccCounts(1, 0, 7, 2), "retired_pages": None, "remapped_rows": None,
    "clock_event_reasons": frozenset({"idle"}), "inforom_valid": True,
    "fabric": FabricReading(3, 0, 1, "00000000-0000-0000-0000-000000000001", 0x1AA), "gpm": None,
    "nvlink_errors": None, "nvlink": (), "mig_enabled": True,
    "mig": (MigReading(1, 0, "1g.10gb", "MIG-a"),), "processes": (ProcessReading(11, "trainer"),),
}  # fmt: skip
READINGS: dict[str, Any] = {r.field: r.type(i + 1) for i, r in enumerate(TABLE)} | STRUCTURED
"""A value for every reading field (not the defaults, so a value landing in the wrong slot shows): each
row of the reading table a distinct number of its type, the structured readings by hand."""


def test_the_positional_constructor_equals_the_keyword_one() -> None:
    """``of_readings`` passes every reading by position in ``_fields`` order: every reading field, in
    any subset, lands where ``DeviceReading(**readings)`` puts it, and a missing one takes its default."""
    assert set(READINGS) == set(FIELD_TYPES)
    for readings in (READINGS, {}, {"power_watts": 1.0, "mig_enabled": True, "processes": ()}):
        fast = DeviceReading.of_readings(3, "GPU-a", "A100", "0:1", 4, {13: 2}, 13, readings)
        slow = DeviceReading(3, "GPU-a", "A100", "0:1", minor_number=4, xid_counts={13: 2}, last_xid=13,
                             **readings)  # fmt: skip
        assert fast == slow and asdict(fast) == asdict(slow)
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


def test_a_merged_shape_is_checked_once_whichever_device_or_cycle_brings_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The steady cycle compares a device's merged shape with its last right one; a different shape is
    looked up among all right ones (another GPU's, an earlier cycle's) and checked reader by reader
    only when it is new, and a wrong answer in a known device is still found."""
    checked: list[str] = []
    real_check = check_fields

    def counting(reader: str, fields: Any) -> None:
        checked.append(reader)
        real_check(reader, fields)

    monkeypatch.setattr(source_module, "check_fields", counting)
    answer: dict[str, Any] = {"encoder_utilization_ratio": 0.5}
    readers = tuple((n, (lambda ctx: dict(answer)) if n == "utilization" else r) for n, r in READERS)
    monkeypatch.setattr(source_module, "READERS", readers)
    source, telemetry = source_on(SimulatedNvml(scenario_of(gpu(), gpu("GPU-b"))))
    source.collect(1000.0)
    assert len(checked) == len(READERS)  # GPU-a's shape is new; GPU-b's is the same
    checked.clear()
    source.collect(1001.0)
    answer["encoder_utilization_ratio"] = None  # another shape, on both GPUs
    source.collect(1002.0)
    assert len(checked) == len(READERS)
    checked.clear()
    answer["encoder_utilization_ratio"] = 0.25  # back to the first one: known
    assert source.collect(1003.0).devices[1].encoder_utilization_ratio == 0.25
    assert checked == []
    answer["encoder_utilization_ratio"] = "0.25"  # wrong: found, on both GPUs, and only this reader
    devices = source.collect(1004.0).devices
    assert [(d.encoder_utilization_ratio, d.up) for d in devices] == [(None, True), (None, True)]
    assert telemetry.view().errors_total == {"nvml_field": 2}
    assert {name for name, (ok, _) in telemetry.view().readers.items() if not ok} == {"utilization"}


class _Generations:
    """A library of three generations of one call; ``broken`` maps a function to the code it raises."""

    def __init__(self) -> None:
        self.broken: dict[str, int] = {}
        self.hidden: set[str] = set()
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name in self.hidden or not name.startswith("nvmlGet"):
            raise AttributeError(name)

        def fn(handle: object, version: int | None = None) -> str:
            self.asked.append(name)
            if name in self.broken:
                raise pynvml.NVMLError(self.broken[name])
            return f"{name}({handle})"

        return fn


GENERATIONS: tuple[Variant, ...] = (
    ("v3", "nvmlGetV3", {"version": 3}),
    ("v2", "nvmlGetV2", {}),
    ("v1", "nvmlGetV1", {}),
)


def test_a_chosen_variant_that_stops_working_hands_over_to_the_next_generation() -> None:
    """Once chosen, a variant is asked straight away; a fallback code, a missing function or another
    variant tuple for the family goes on as the first probe did, and the new choice sticks."""
    lib = _Generations()
    nvml = NvmlCaller(lib)

    def ask() -> Any:
        return nvml.call_first("GPU-a", "thing", "thing", GENERATIONS, "h")

    assert [ask(), ask()] == ["nvmlGetV3(h)"] * 2 and nvml.chosen("thing") == "v3"
    lib.broken["nvmlGetV3"] = pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    assert ask() == "nvmlGetV2(h)" and nvml.chosen("thing") == "v2"
    lib.asked.clear()
    assert ask() == "nvmlGetV2(h)" and lib.asked == ["nvmlGetV2"]  # v3 is not asked again
    lib.hidden.add("nvmlGetV2")  # gone from the binding: v1, chosen
    assert ask() == "nvmlGetV1(h)" and nvml.chosen("thing") == "v1"
    lib.broken["nvmlGetV1"] = pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH  # the last: its answer is ABSENT
    assert ask() is ABSENT and nvml.errors and nvml.chosen("thing") == "v1"
    nvml.errors.clear()
    lib.broken["nvmlGetV1"] = pynvml.NVML_ERROR_NOT_SUPPORTED  # no fallback code: remembered per field
    assert ask() is ABSENT and not nvml.supported("GPU-a", "thing") and not nvml.errors
    assert nvml.call_first("GPU-b", "thing", "thing", GENERATIONS[:1], "h") is ABSENT  # v3 alone: broken
    del lib.broken["nvmlGetV3"]
    assert nvml.call_first("GPU-b", "thing", "thing", GENERATIONS[:1], "h") == "nvmlGetV3(h)"
    assert nvml.chosen("thing") == "v3"  # another variant tuple for the family: probed, and chosen
