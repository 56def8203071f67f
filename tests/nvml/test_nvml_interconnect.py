"""PCIe and NVLink counters through the NVML source: values in = values out, in the device's one
field-values call (NVLink as the driver's sums over the links, per-link error counters only when a
total moved, per-link fields where a driver refuses the sums); rates absent on the first cycle and
over a counter reset, never negative; a GPU without NVLink logged once and not asked again; the
nvlink health check."""

from __future__ import annotations

import logging

import pynvml
import pytest

from falcon_gpu.health import HealthEvaluator
from falcon_gpu.model.cycle import FAIL, PASS, WARN
from falcon_gpu.model.snapshot import DeviceReading, NvlinkErrors, NvlinkReading, Snapshot
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.sources.nvml.field_values import (
    FIELDS,
    NVLINK_ERROR_TOTALS,
    NVLINK_LINK_ERRORS,
    NVLINK_TRAFFIC,
)
from falcon_gpu.sources.nvml.readers.nvlink_links import NVLINK_DL_ERRORS
from tests.nvml.helpers import Quirky, gpu, scenario_of, source_on

TX = [1.0e12, 1.004e12, 1.012e12, 3.0e9, 7.0e9]
"""A driver reload between cycles 2 and 3: the counter starts again."""
RX = [2.0e12, 2.001e12, 2.002e12, 2.003e12, 2.004e12]


ZERO_ERRORS = {"crc_flit_errors": 0, "crc_data_errors": 0, "replay_errors": 0, "recovery_errors": 0}


def link(n: int, **errors: object) -> dict[str, object]:
    return {"link": n, "tx_bytes": [n * 1024 * 1000, (n + 1) * 1024 * 2000], "rx_bytes": 1024 * 7,
            **ZERO_ERRORS, **errors}  # fmt: skip


def _asking(sim: SimulatedNvml, refuse: frozenset[object] = frozenset()) -> tuple[Quirky, list[list[object]]]:
    """The simulator recording each field-values request, answering NOT_SUPPORTED for ``refuse`` (field
    IDs, or (field ID, scope ID) pairs): a driver that does not know the aggregates."""
    asked: list[list[object]] = []

    def field_values(handle: object, ids: list[object]) -> object:
        asked.append(list(ids))
        values = sim.nvmlDeviceGetFieldValues(handle, ids)
        for v in values:
            if v.fieldId in refuse or (v.fieldId, v.scopeId) in refuse:
                v.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return values

    return Quirky(sim, override={"nvmlDeviceGetFieldValues": field_values}), asked


TOTALS = frozenset(s.field_id for s in NVLINK_ERROR_TOTALS)
SUMS = frozenset(s.request for s in NVLINK_TRAFFIC)
PER_LINK_ERRORS = frozenset(s.request for s in NVLINK_LINK_ERRORS)
DL = frozenset(s.field_id for kind in NVLINK_DL_ERRORS for s in kind)


def dl_requests(*links: int) -> set[object]:
    """The data-link error fields of ``links`` (what the slow DL call asks)."""
    return {s.request for kind in NVLINK_DL_ERRORS for s in kind if s.request[1] in links}


def _nvlink(device: DeviceReading) -> tuple[object, ...]:
    return (device.nvlink_tx_bytes, device.nvlink_rx_bytes, device.nvlink_tx_bytes_per_second,
            device.nvlink_rx_bytes_per_second, device.nvlink_errors, device.nvlink)  # fmt: skip


def test_pcie_and_nvlink_counters_come_out_as_they_went_in_in_one_field_values_call() -> None:
    sim = SimulatedNvml(
        scenario_of(
            gpu(pcie={"tx_bytes": TX, "rx_bytes": RX}, nvlink=[link(0, replay_errors=[0, 2]), link(3)])
        )
    )
    lib, asked = _asking(sim)
    source, telemetry = source_on(lib)
    devs = [source.collect(1000.0 + 10 * t).devices[0] for t in range(3)]
    assert [(d.pcie_tx_bytes, d.pcie_rx_bytes) for d in devs] == [
        (TX[0], RX[0]),
        (TX[1], RX[1]),
        (TX[2], RX[2]),
    ]
    assert [(d.nvlink_tx_bytes, d.nvlink_rx_bytes) for d in devs] == [
        (3 * 1024 * 1000, 2 * 1024 * 7), (5 * 1024 * 2000, 2 * 1024 * 7), (5 * 1024 * 2000, 2 * 1024 * 7)
    ]  # links 0 and 3 summed  # fmt: skip
    assert [d.nvlink_errors for d in devs] == [NvlinkErrors(0, 0, 0, 0)] + [NvlinkErrors(0, 0, 2, 0)] * 2
    # only links with errors; on cycle 2 the totals held: the links are not asked, their readings stay
    assert [d.nvlink for d in devs] == [(), *[(NvlinkReading(0, NvlinkErrors(0, 0, 2, 0)),)] * 2]
    assert devs[1].pcie_tx_bytes_per_second == pytest.approx((TX[1] - TX[0]) / 10)
    assert devs[1].nvlink_tx_bytes_per_second == pytest.approx((5 * 1024 * 2000 - 3 * 1024 * 1000) / 10)
    # one batched call per cycle with the 2 sums and 4 totals; the data-link error counters of the two
    # links in a call of their own: on cycle 0, on cycle 1 (a total moved) and on cycle 2 (the answer had
    # changed: asked until two agree); the older per-link error fields never (the DL fields count replays)
    assert len(asked) == 6 and all(set(ids) == dl_requests(0, 3) for ids in asked[1::2])
    batches = [set(ids) for ids in asked[0::2]]
    assert all(ids >= SUMS | TOTALS and not PER_LINK_ERRORS & ids for ids in batches) and len(
        asked[0]
    ) == len(FIELDS)
    assert telemetry.view().errors_total == {}


def test_error_totals_back_at_zero_clear_the_per_link_series_without_asking_the_links() -> None:
    sim = SimulatedNvml(scenario_of(gpu(nvlink=[link(2, crc_data_errors=[0, 3, 3, 0, 0])])))
    lib, asked = _asking(sim)
    source, _ = source_on(lib)
    devs = [source.collect(1000.0 + t).devices[0] for t in range(5)]
    assert [d.nvlink for d in devs] == [(), *[(NvlinkReading(2, NvlinkErrors(0, 3, 0, 0)),)] * 2, (), ()]
    assert [d.nvlink_errors for d in devs] == [NvlinkErrors(0, c, 0, 0) for c in (0, 3, 3, 0, 0)]
    # cycle 0 finds what this GPU answers (only NVLink: 2 sums + 4 totals stay), then the link's 3
    # data-link counters; on cycle 1 (a total moved) those again and the 12 links' data CRC counters
    # (the kind the DL fields do not count), on cycle 3 (back at 0) the DL ones again
    assert [len(ids) for ids in asked] == [len(FIELDS), 3, 6, 3, 12, 6, 6, 3, 6]


def test_a_driver_without_the_aggregates_gets_the_same_readings_from_the_per_link_fields() -> None:
    def node() -> SimulatedNvml:
        return SimulatedNvml(scenario_of(gpu(
            pcie={"tx_bytes": TX, "rx_bytes": RX},
            nvlink=[link(0, replay_errors=[0, 2], crc_flit_errors=[1, 1, 4]), link(3),
                    link(11, recovery_errors=1)],
        )))  # fmt: skip

    new, _ = _asking(node())
    old, asked = _asking(node(), refuse=TOTALS | SUMS | DL)
    (src_new, tel_new), (src_old, tel_old) = source_on(new), source_on(old)
    for t in range(4):
        got, want = src_old.collect(1000.0 + 10 * t).devices[0], src_new.collect(1000.0 + 10 * t).devices[0]
        assert _nvlink(got) == _nvlink(want), t
    assert want.nvlink_errors == NvlinkErrors(4, 0, 2, 1) and [n.link for n in want.nvlink] == [0, 11]
    # cycle 0: the batch, then the per-link fields in place of the refused aggregates, then the DL fields
    # (refused: never asked again); then one batch a cycle
    has = {
        (pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, 11),
        pynvml.NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_L11,
    }
    assert len(asked) == 6 and all(set(ids) >= has and not set(ids) & (SUMS | TOTALS) for ids in asked[3:])
    assert tel_new.view().errors_total == {} == tel_old.view().errors_total


def test_a_counter_reset_gives_no_rate_for_that_interval_and_never_a_negative_one() -> None:
    sim = SimulatedNvml(scenario_of(gpu(pcie={"tx_bytes": TX, "rx_bytes": RX})))
    source, _ = source_on(sim)
    rates = [source.collect(1000.0 + 10 * t).devices[0].pcie_tx_bytes_per_second for t in range(5)]
    assert rates[0] is None and rates[3] is None  # first cycle; the reset
    assert (
        rates[1] == pytest.approx(4e8) and rates[2] == pytest.approx(8e8) and rates[4] == pytest.approx(4e8)
    )


def test_a_gpu_without_nvlink_is_logged_once_and_its_links_not_asked_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "falcon_gpu.nvml")
    asked: list[int] = []
    sim = SimulatedNvml(scenario_of(gpu(pcie={"tx_bytes": 1, "rx_bytes": 2})))
    real = sim.nvmlDeviceGetFieldValues

    def counting(handle: object, ids: list[object]) -> object:
        asked.append(len(ids))
        return real(handle, ids)

    sim.nvmlDeviceGetFieldValues = counting  # type: ignore[method-assign]
    source, _ = source_on(sim)
    devs = [source.collect(1000.0 + t).devices[0] for t in range(3)]
    assert [(d.nvlink, d.nvlink_tx_bytes, d.nvlink_errors) for d in devs] == [((), None, None)] * 3
    assert asked[0] >= 2 + 6  # 2 NVLink traffic sums + 4 error totals: refused, so in the same cycle
    assert asked[1] == 86  # the batch again: 18 links x (TX, RX) + 12 links x 4 error counters + the PCIe
    # pair; then only the PCIe pair:
    assert asked[2:] == [2, 2]  # this GPU answers nothing else
    lines = [
        r.getMessage() for r in caplog.records if "NVLink" in r.getMessage() and r.levelno == logging.INFO
    ]
    assert len(lines) == 1  # the GPU model's line (issue 20 item 5), among what else it lacks
    assert "does not support " in lines[0]
    assert "84 NVLink fields (nvlink_l0_tx ... nvlink_l11_recovery)" in lines[0]


def nvlink_snapshot(t: float, errors: NvlinkErrors | None) -> Snapshot:
    dev = DeviceReading(index=0, uuid="GPU-a", name="x", pci_bus_id="", nvlink_errors=errors)
    return Snapshot(timestamp=t, nvml_ok=True, devices=(dev,))


@pytest.mark.parametrize(
    ("kind", "level"), [("crc_flit", WARN), ("crc_data", WARN), ("replay", WARN), ("recovery", FAIL)]
)
def test_nvlink_errors_rising_warn_and_recovery_errors_fail(kind: str, level: int) -> None:
    health = HealthEvaluator()
    zero = {"crc_flit": 0, "crc_data": 0, "replay": 0, "recovery": 0}
    checks = [
        health.evaluate(nvlink_snapshot(t, NvlinkErrors(**{**zero, kind: n})))["GPU-a"].checks["nvlink"]
        for t, n in enumerate([5, 5, 7, 7, 1])  # 5 at start is history, not a rise; 1 is a reset
    ]
    assert checks == [PASS, PASS, level, PASS, PASS]


def test_a_gpu_without_nvlink_error_counters_has_no_nvlink_check() -> None:
    health = HealthEvaluator()
    assert "nvlink" not in health.evaluate(nvlink_snapshot(0.0, None))["GPU-a"].checks


def test_healthy_links_share_one_zero_record_and_a_later_rise_still_warns() -> None:
    """The steady path (every sum answered, no error): the same zero totals each cycle, passed by the
    nvlink check without comparing kinds; the cycle a link counts a replay warns and names the link."""
    sim = SimulatedNvml(scenario_of(gpu(nvlink=[link(0), link(1, replay_errors=[0, 0, 0, 3, 3])])))
    source, telemetry = source_on(sim)
    health = HealthEvaluator()
    devs, checks = [], []
    for t in range(5):
        snapshot = source.collect(1000.0 + 10 * t)
        devs.append(snapshot.devices[0])
        checks.append(health.evaluate(snapshot)["GPU-a"].checks["nvlink"])
    assert devs[0].nvlink_errors is devs[1].nvlink_errors is devs[2].nvlink_errors
    assert devs[2].nvlink_errors == NvlinkErrors(0, 0, 0, 0) and devs[2].nvlink == ()
    assert devs[3].nvlink_errors == devs[4].nvlink_errors == NvlinkErrors(0, 0, 3, 0)
    assert devs[3].nvlink == devs[4].nvlink == (NvlinkReading(1, NvlinkErrors(0, 0, 3, 0)),)
    assert checks == [PASS, PASS, PASS, WARN, PASS]
    assert [d.nvlink_tx_bytes for d in devs[:2]] == [1024 * 1000, 3 * 1024 * 2000]
    assert devs[1].nvlink_tx_bytes_per_second == (3 * 1024 * 2000 - 1024 * 1000) / 10
    assert telemetry.view().errors_total == {}


def test_links_counted_by_the_dl_fields_alone_share_one_zero_record_while_nothing_moves() -> None:
    """A Hopper or later whose older error totals are refused (NVIDIA's mock, which counts on the DL
    fields): the steady cycle publishes the same totals record each cycle (crc_data, which no DL field
    counts, None), and a replay that the next DL read finds still warns and names the link."""
    sim = SimulatedNvml(scenario_of(gpu(nvlink=[link(0), link(1, replay_errors=[0, 0, 0, 0, 3])])))
    quirky, _ = _asking(sim, refuse=TOTALS | PER_LINK_ERRORS)
    source, telemetry = source_on(quirky)
    health = HealthEvaluator()
    devs, checks = [], []
    for t in (0, 10, 20, 30, 100):  # the DL counters are read again with the slow readings (a minute)
        snapshot = source.collect(1000.0 + t)
        devs.append(snapshot.devices[0])
        checks.append(health.evaluate(snapshot)["GPU-a"].checks["nvlink"])
    assert devs[0].nvlink_errors is devs[1].nvlink_errors is devs[2].nvlink_errors is devs[3].nvlink_errors
    assert devs[3].nvlink_errors == NvlinkErrors(0, None, 0, 0) and devs[3].nvlink == ()
    assert devs[4].nvlink_errors == NvlinkErrors(0, None, 3, 0)
    assert devs[4].nvlink == (NvlinkReading(1, NvlinkErrors(0, None, 3, 0)),)
    assert checks == [PASS, PASS, PASS, PASS, WARN]
    assert devs[1].nvlink_tx_bytes == 3 * 1024 * 2000
    assert telemetry.view().errors_total == {}
