"""NVLink on Hopper and later through the simulator: which links are up (``nvmlDeviceGetNvLinkState``,
once a minute), the per-link data-link error counters of all 18 links (``NVML_FI_DEV_NVLINK_ERROR_DL_*``,
with the slow readings) and the fall-back to the older ``_ERROR_COUNT_TOTAL`` / ``_L0``-``_L11`` fields
on a driver without them; no NVLink readings on a GPU without an active link."""

from __future__ import annotations

import logging
from typing import Any

import pynvml
import pytest

from falcon_gpu.health import HealthEvaluator
from falcon_gpu.model.cycle import FAIL, PASS, WARN
from falcon_gpu.model.snapshot import DeviceReading, NvlinkErrors, NvlinkReading
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.simulator.scenario.parse import ScenarioError
from falcon_gpu.sources.nvml.readers.nvlink_links import NVLINK_DL_ERRORS
from falcon_gpu.sources.nvml.slow import REFRESH_S
from tests.nvml.helpers import Quirky, gpu, scenario_of, source_on

H100 = "NVIDIA H100 80GB HBM3"
ZERO = {"crc_flit_errors": 0, "crc_data_errors": 0, "replay_errors": 0, "recovery_errors": 0}
DL_IDS = frozenset(s.field_id for kind in NVLINK_DL_ERRORS for s in kind)


def links(count: int = 18, **errors: dict[str, object]) -> list[dict[str, object]]:
    """``count`` links; ``errors``: link number (as ``l<n>``) -> its error keys."""
    return [
        {"link": n, "tx_bytes": 1024 * n, "rx_bytes": 2048 * n, **ZERO, **errors.get(f"l{n}", {})}
        for n in range(count)
    ]


def h100(*, not_supported: tuple[str, ...] = (), **errors: dict[str, object]) -> dict[str, object]:
    return gpu(name=H100, nvlink=links(**errors), not_supported=list(not_supported))


class Counting:
    """The simulator, counting the field-values calls and the IDs each asked."""

    def __init__(self, sim: SimulatedNvml) -> None:
        self.sim = sim
        self.asked: list[list[Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sim, name)

    def nvmlDeviceGetFieldValues(self, handle: Any, ids: list[Any]) -> Any:
        self.asked.append(list(ids))
        return self.sim.nvmlDeviceGetFieldValues(handle, ids)


def _nvlink(dev: DeviceReading) -> tuple[object, ...]:
    return dev.nvlink_tx_bytes, dev.nvlink_rx_bytes, dev.nvlink_errors, dev.nvlink


def test_errors_on_links_12_to_17_count_where_the_driver_has_only_the_data_link_fields() -> None:
    """Like NVIDIA's mock and Hopper drivers: the _TOTAL and _L0-_L11 fields answer NOT_SUPPORTED."""
    scenario = scenario_of(h100(
        not_supported=("nvlink_error_counts",),
        l3={"replay_errors": [0, 2]}, l12={"crc_flit_errors": 5}, l17={"recovery_errors": [0, 0, 0, 1]},
    ))  # fmt: skip
    source, telemetry = source_on(SimulatedNvml(scenario))
    health = HealthEvaluator()
    devs, checks = [], []
    for t in (1000.0, 1010.0, 1000.0 + REFRESH_S + 10, 1000.0 + REFRESH_S + 20):
        snapshot = source.collect(t)
        devs.append(snapshot.devices[0])
        checks.append(health.evaluate(snapshot)["GPU-a"].checks["nvlink"])
    # cycle 1: within the minute, the counters of cycle 0 again (the replays of link 3 not seen yet);
    # cycle 2: read again, risen; cycle 3: read again (the answer had changed), link 17's recovery seen
    assert [d.nvlink_errors for d in devs] == [
        NvlinkErrors(5, None, 0, 0), NvlinkErrors(5, None, 0, 0), NvlinkErrors(5, None, 2, 0),
        NvlinkErrors(5, None, 2, 1),
    ]  # fmt: skip
    assert devs[3].nvlink == (
        NvlinkReading(3, NvlinkErrors(0, None, 2, 0)),
        NvlinkReading(12, NvlinkErrors(5, None, 0, 0)),
        NvlinkReading(17, NvlinkErrors(0, None, 0, 1)),
    )
    assert checks == [PASS, PASS, WARN, FAIL]
    assert devs[0].nvlink_tx_bytes == 1024 * sum(range(18))  # traffic as before: the sum of the 18 links
    assert telemetry.view().errors_total == {}


def test_a_driver_without_the_data_link_fields_gets_the_same_readings_from_the_older_ones() -> None:
    errors = {"l0": {"replay_errors": [0, 2]}, "l5": {"crc_flit_errors": [1, 1, 4]},
              "l11": {"recovery_errors": 1}, "l2": {"crc_data_errors": [0, 3]}}  # fmt: skip
    new = Counting(SimulatedNvml(scenario_of(h100(**errors))))
    old = Counting(SimulatedNvml(scenario_of(h100(not_supported=("nvlink_dl_errors",), **errors))))
    (src_new, tel_new), (src_old, tel_old) = source_on(new), source_on(old)
    for t in range(4):
        now = 1000.0 + (REFRESH_S + 1) * t  # every cycle a refresh: the DL side reads each one anew
        got, want = src_old.collect(now).devices[0], src_new.collect(now).devices[0]
        assert _nvlink(got) == _nvlink(want), t
    assert want.nvlink_errors == NvlinkErrors(4, 3, 2, 1) and [n.link for n in want.nvlink] == [0, 2, 5, 11]
    # the DL fields: asked once, on cycle 0, refused (all 54), never again
    asked_dl = [ids for ids in old.asked if any(isinstance(i, tuple) and i[0] in DL_IDS for i in ids)]
    assert len(asked_dl) == 1 and len(asked_dl[0]) == 54
    assert tel_new.view().errors_total == {} == tel_old.view().errors_total


def test_steady_cycles_make_one_field_values_call_and_ask_the_link_states_once_a_minute() -> None:
    sim = SimulatedNvml(scenario_of(h100()))
    lib = Counting(sim)
    source, _ = source_on(lib)
    calls = []
    for t in (1000.0, 1010.0, 1020.0, 1000.0 + REFRESH_S + 1, 1000.0 + REFRESH_S + 11):
        before_fv, before_state = len(lib.asked), sim.calls["nvmlDeviceGetNvLinkState"]
        dev = source.collect(t).devices[0]
        calls.append((len(lib.asked) - before_fv, sim.calls["nvmlDeviceGetNvLinkState"] - before_state))
        assert dev.nvlink_errors == NvlinkErrors(0, 0, 0, 0) and dev.nvlink == ()
    # cycle 0: the batch, then the 18 links' DL counters in a call of their own after 18 state calls;
    # then one call a cycle, and the same again once a minute
    assert calls == [(2, 18), (1, 0), (1, 0), (2, 18), (1, 0)]


def test_a_gpu_whose_links_are_down_has_no_nvlink_readings() -> None:
    down = [{"link": n, "tx_bytes": 0, "rx_bytes": 0, **ZERO, "active": 0} for n in range(18)]
    going = [{"link": 0, "tx_bytes": 5120, "rx_bytes": 7168, **ZERO, "active": [1, 1, 0]}]
    scenario = scenario_of(gpu("GPU-a", name=H100, nvlink=down), gpu("GPU-b", name=H100, nvlink=going))
    source, telemetry = source_on(SimulatedNvml(scenario))
    snaps = [source.collect(t) for t in (1000.0, 1010.0 + REFRESH_S, 1020.0 + 2 * REFRESH_S)]
    assert all(_nvlink(s.devices[0]) == (None, None, None, ()) for s in snaps)
    assert [_nvlink(s.devices[1])[0] for s in snaps] == [5120, 5120, None]  # down from cycle 2 on
    assert telemetry.view().errors_total == {}


def test_the_simulator_answers_the_link_state_as_nvml_does() -> None:
    scenario = scenario_of(
        gpu("GPU-a", name=H100, nvlink=[{"link": 0, "active": [1, 0]}, {"link": 3}]), gpu("GPU-b")
    )
    sim = SimulatedNvml(scenario)
    sim.nvmlInit()
    sim.nvmlDeviceGetCount()
    a, b = sim.nvmlDeviceGetHandleByIndex(0), sim.nvmlDeviceGetHandleByIndex(1)
    assert [sim.nvmlDeviceGetNvLinkState(a, n) for n in (0, 1, 3, 17)] == [1, 0, 1, 0]
    for handle, link, code in (
        (a, 18, pynvml.NVML_ERROR_INVALID_ARGUMENT),
        (b, 0, pynvml.NVML_ERROR_NOT_SUPPORTED),
    ):
        with pytest.raises(pynvml.NVMLError) as raised:
            sim.nvmlDeviceGetNvLinkState(handle, link)
        assert raised.value.value == code
    sim.nvmlDeviceGetCount()  # cycle 1: link 0 went down
    assert sim.nvmlDeviceGetNvLinkState(a, 0) == 0


def test_a_link_state_that_is_not_0_or_1_is_refused_naming_its_path() -> None:
    with pytest.raises(ScenarioError, match=r"gpus\[0\]\.nvlink\[0\]\.active: expected 1"):
        scenario_of(gpu(nvlink=[{"link": 0, "active": 2}]))


def test_the_not_supported_line_names_the_fields_the_driver_refused(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "falcon_gpu.nvml")
    source, _ = source_on(SimulatedNvml(scenario_of(h100(not_supported=("nvlink_error_counts",)))))
    source.collect(1000.0)
    lines = [r.getMessage() for r in caplog.records if "NVLink" in r.getMessage()]
    assert len(lines) == 1  # the GPU model's one line (issue 20 item 5)
    assert "48 NVLink fields (nvlink_l0_crc_flit ... nvlink_l11_recovery)" in lines[0]
    assert "links it does not have" not in lines[0]


def test_a_binding_without_the_link_state_reads_nvlink_as_the_field_values_answer() -> None:
    scenario = scenario_of(h100(l14={"replay_errors": 3}), gpu("GPU-b"))
    sim = SimulatedNvml(scenario)
    source, telemetry = source_on(Quirky(sim, hide=("nvmlDeviceGetNvLinkState",)))
    a, b = source.collect(1000.0).devices
    assert a.nvlink_errors == NvlinkErrors(0, 0, 3, 0) and [n.link for n in a.nvlink] == [14]
    assert _nvlink(b) == (None, None, None, ())  # no NVLink: every field refused
    assert sim.calls["nvmlDeviceGetNvLinkState"] == 0 and telemetry.view().errors_total == {}


def test_a_gpu_without_nvlink_is_asked_its_link_state_once_and_says_nothing_of_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, "falcon_gpu")
    sim = SimulatedNvml(scenario_of(gpu(pcie={"tx_bytes": 1, "rx_bytes": 2})))
    source, telemetry = source_on(sim)
    for t in (1000.0, 1000.0 + REFRESH_S + 1, 1000.0 + 2 * REFRESH_S + 2):
        assert _nvlink(source.collect(t).devices[0]) == (None, None, None, ())
    assert sim.calls["nvmlDeviceGetNvLinkState"] == 1
    assert not [r for r in caplog.records if "nvlink_state" in r.getMessage()]
    assert telemetry.view().errors_total == {}
