"""A reading declared with ``by_table`` (the T.Limit temperatures) end to end through the NVML
source: its value from the one field-values call, NOT_SUPPORTED remembered per GPU, an error
costing only the reader that reads it."""

from __future__ import annotations

import logging
from typing import Any

import pynvml
import pytest

from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.sources.nvml.readers import READERS
from tests.nvml.helpers import Quirky, gpu, scenario_of, source_on

SLOWDOWN, SHUTDOWN = (
    pynvml.NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT,
    pynvml.NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT,
)
ADA = gpu("GPU-ada", temperature_celsius=40, slowdown_tlimit_celsius=[-2, 3], shutdown_tlimit_celsius=-8)
AMPERE = gpu("GPU-old", temperature_celsius=40)


def test_signed_tlimits_reach_the_snapshot_and_an_older_gpu_has_none(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sim = SimulatedNvml(scenario_of(ADA, AMPERE))
    source, telemetry = source_on(sim)
    with caplog.at_level(logging.DEBUG, logger="falcon_gpu"):
        snaps = [source.collect(1000.0 + t) for t in range(3)]
    ada, old = snaps[0].devices
    assert (ada.slowdown_tlimit_celsius, ada.shutdown_tlimit_celsius) == (-2.0, -8.0)
    assert snaps[2].devices[0].slowdown_tlimit_celsius == 3.0  # per cycle, the last value repeating
    assert old.slowdown_tlimit_celsius is None and old.shutdown_tlimit_celsius is None
    assert old.temperature_celsius == 40.0  # nothing else of the reader lost
    not_supported = [r.getMessage() for r in caplog.records if "tlimit" in r.getMessage()]
    assert sorted(m for m in not_supported if "GPU-" in m) == [  # the details, at debug
        "NVML: shutdown_tlimit_celsius is not supported on GPU-old; not asking again",
        "NVML: slowdown_tlimit_celsius is not supported on GPU-old; not asking again",
    ]
    (said,) = [
        r.getMessage() for r in caplog.records if "tlimit" in r.getMessage() and r.levelno == logging.INFO
    ]
    assert (
        "slowdown_tlimit_celsius (on 1 of them), shutdown_tlimit_celsius (on 1 of them)" in said
    )  # one model
    assert telemetry.view().errors_total == {}
    assert sim.calls["nvmlDeviceGetFieldValues"] == 6  # still one call per GPU per cycle


def test_a_field_answering_an_error_costs_its_reader_only() -> None:
    sim = SimulatedNvml(scenario_of(ADA))

    def field_values(handle: Any, ids: list[Any]) -> Any:
        values = sim.nvmlDeviceGetFieldValues(handle, ids)
        for v in values:
            if v.fieldId == SHUTDOWN:
                v.nvmlReturn = pynvml.NVML_ERROR_UNKNOWN
        return values

    source, telemetry = source_on(Quirky(sim, override={"nvmlDeviceGetFieldValues": field_values}))
    device = source.collect(1000.0).devices[0]
    assert device.shutdown_tlimit_celsius is None and device.slowdown_tlimit_celsius == -2.0
    assert device.temperature_celsius == 40.0
    view = telemetry.view()
    assert {name: ok for name, (ok, _) in view.readers.items()} == {
        name: name != "thermal_power" for name, _ in READERS
    }
    assert sum(view.errors_total.values()) == 1
