"""GPM through the NVML source on the simulator: values in = values out, the first cycle absent,
pre-Hopper and old bindings absent and logged once, samples freed when a GPU is lost and on close,
MIG instances sampled on their own and their processes given the instance's SM activity."""

from __future__ import annotations

import logging
from typing import Any

import pynvml
import pytest

from falcon_gpu.model.snapshot import GPM_METRICS, GpmReading
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.simulator.scenario.model import GPM_KEYS
from falcon_gpu.sources.nvml import gpm as gpm_module
from tests.nvml.helpers import Quirky, gpu, scenario_of, source_on
from tests.nvml.test_nvml_readers import FULL, PER_CYCLE, _calls_per_gpu

GPM = {
    "sm_active_percent": [10, 63, 70],
    "sm_occupancy_percent": [5, 41, 45],
    "tensor_active_percent": [0, 22, 30],
    "dram_active_percent": [1, 35, 38],
    "graphics_active_percent": [11, 73, 80],
    "fp64_active_percent": 0,
    "fp32_active_percent": [2, 30, 28],
    "fp16_active_percent": [3, 12, 15],
}


def hopper(uuid: str = "GPU-h", **extra: Any) -> dict[str, object]:
    return gpu(uuid, name="NVIDIA H100 80GB HBM3", gpm=GPM, **extra)


def expected(cycle: int, gpm: dict[str, Any] = GPM) -> GpmReading:
    """The reading between cycle-1 and cycle: the scenario's percent of that cycle, as a ratio."""
    values = {}
    for name, key in zip(GPM_METRICS, GPM_KEYS, strict=True):
        series = gpm.get(key)
        if series is None:
            values[name] = None
            continue
        series = series if isinstance(series, list) else [series]
        values[name] = series[min(cycle, len(series) - 1)] / 100
    return GpmReading(**values)


def test_gpm_values_in_are_values_out_from_the_second_cycle_and_absent_on_the_first() -> None:
    sim = SimulatedNvml(scenario_of(hopper()))
    source, telemetry = source_on(sim)
    readings = [source.collect(1000.0 + t).devices[0].gpm for t in range(3)]
    assert readings == [None, expected(1), expected(2)]
    assert telemetry.view().errors_total == {}


def test_a_pre_hopper_gpu_has_no_gpm_is_asked_once_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "falcon_gpu.nvml")
    sim = SimulatedNvml(scenario_of(hopper(), gpu("GPU-a")))
    source, telemetry = source_on(sim)
    snaps = [source.collect(1000.0 + t) for t in range(4)]
    assert [s.devices[1].gpm for s in snaps] == [None] * 4
    assert [s.devices[0].gpm for s in snaps][1:] == [expected(1), expected(2), expected(2)]
    assert sim.calls["nvmlGpmQueryDeviceSupport"] == 2  # once per GPU, not per cycle
    assert sim.calls["nvmlGpmSampleGet"] == 4  # the Hopper only
    logged = [r.getMessage() for r in caplog.records if "GPM" in r.getMessage() and r.levelno == logging.INFO]
    assert len(logged) == 1  # the model's line (issue 20 item 5), which names GPM among what it lacks
    assert logged[0].startswith("NVML: NVIDIA A100-SXM4-40GB does not support ")
    assert "GPM (Hopper and later have it)" in logged[0]
    assert telemetry.view().errors_total == {}


@pytest.mark.parametrize(
    "quirk",
    [
        {"hide": ("nvmlGpmQueryDeviceSupport", "nvmlGpmSampleGet", "nvmlGpmMetricsGet")},  # old pynvml
        {"override": {"nvmlGpmQueryDeviceSupport": lambda *_: (_ for _ in ()).throw(
            pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND))}},  # old driver
    ],
    ids=["old-pynvml", "old-driver"],
)  # fmt: skip
def test_a_driver_or_binding_without_gpm_is_absent_not_an_error(quirk: dict[str, Any]) -> None:
    sim = SimulatedNvml(scenario_of(hopper()))
    source, telemetry = source_on(Quirky(sim, **quirk))
    assert [source.collect(1000.0 + t).devices[0].gpm for t in range(3)] == [None] * 3
    assert sim.calls["nvmlGpmSampleAlloc"] == 0 and sim.gpm_samples == 0
    assert telemetry.view().errors_total == {}


def test_gpm_not_supported_by_the_driver_is_absent() -> None:
    sim = SimulatedNvml(scenario_of(hopper(not_supported=["gpm"])))
    source, telemetry = source_on(sim)
    assert [source.collect(1000.0 + t).devices[0].gpm for t in range(3)] == [None] * 3
    assert sim.calls["nvmlGpmQueryDeviceSupport"] == 1 and sim.gpm_samples == 0
    assert telemetry.view().errors_total == {}


def test_a_metric_the_device_lacks_is_none_and_the_others_stay() -> None:
    partial = {"sm_active_percent": [40, 50], "tensor_active_percent": [1, 2]}
    sim = SimulatedNvml(scenario_of(gpu("GPU-h", gpm=partial)))
    source, _ = source_on(sim)
    source.collect(1000.0)
    assert source.collect(1001.0).devices[0].gpm == GpmReading(sm_active=0.5, tensor_active=0.02)


def test_a_lost_gpu_frees_its_samples_and_the_others_go_on() -> None:
    sim = SimulatedNvml(scenario_of(hopper("GPU-1"), hopper("GPU-2", lost_at_cycle=2)))
    source, telemetry = source_on(sim)
    _, second, third = (source.collect(1000.0 + t) for t in range(3))
    assert sim.gpm_samples == 2  # the lost GPU's two are freed
    assert [d.gpm for d in second.devices] == [expected(1), expected(1)]
    assert (
        third.devices[0].gpm == expected(2) and third.devices[1].up is False and third.devices[1].gpm is None
    )
    assert sim.calls["nvmlGpmSampleFree"] == 2
    assert set(telemetry.view().errors_total) == {"gpu"}
    source.close()
    assert sim.gpm_samples == 0


def test_steady_state_costs_two_nvml_calls_per_gpu_and_instance() -> None:
    sim = SimulatedNvml(scenario_of(hopper()))
    source, _ = source_on(sim)
    for t in range(2):
        source.collect(1000.0 + t)
    before = {k: v for k, v in sim.calls.items() if k.startswith("nvmlGpm")}
    source.collect(1002.0)
    after = {k: v - before.get(k, 0) for k, v in sim.calls.items() if k.startswith("nvmlGpm")}
    assert {k: v for k, v in after.items() if v} == {"nvmlGpmSampleGet": 1, "nvmlGpmMetricsGet": 1}


def mig_gpu(**extra: Any) -> dict[str, object]:
    def instance(
        gi: int, ci: int, percent: list[int], processes: list[dict[str, object]]
    ) -> dict[str, object]:
        return {
            "gpu_instance_id": gi, "compute_instance_id": ci, "profile": "1g.10gb", "uuid": f"MIG-{gi}-{ci}",
            "memory_total_bytes": 10 << 30, "memory_used_bytes": 3 << 30, "processes": processes,
            "gpm": {"sm_active_percent": percent},
        }  # fmt: skip

    mem = lambda pid, gib: {"pid": pid, "used_memory_bytes": gib << 30}  # noqa: E731
    return hopper(
        memory_total_bytes=80 << 30, memory_used_bytes=10 << 30,
        mig=[instance(1, 0, [10, 80], [mem(11, 1)]), instance(2, 0, [20, 60], [mem(21, 1), mem(22, 3)])],
        **extra,
    )  # fmt: skip


def test_mig_instances_have_their_own_gpm_and_give_it_to_their_processes() -> None:
    sim = SimulatedNvml(scenario_of(mig_gpu()))
    source, telemetry = source_on(sim)
    first = source.collect(1000.0).devices[0]
    assert [m.gpm for m in first.mig] == [None, None]
    assert {p.pid: p.sm_util_ratio for p in first.processes} == {11: None, 21: None, 22: None}
    dev = source.collect(1001.0).devices[0]
    assert dev.gpm == expected(1)  # the whole GPU too
    assert [m.gpm.sm_active if m.gpm else None for m in dev.mig] == [0.8, 0.6]
    # alone on instance 1: all of it; instance 2 is shared by memory, 1 GiB : 3 GiB
    by_instance = {(p.pid, m.gpu_instance_id): p.sm_util_ratio for m in dev.mig for p in m.processes}
    assert by_instance == {(11, 1): 0.8, (21, 2): pytest.approx(0.15), (22, 2): pytest.approx(0.45)}
    assert {p.pid: p.sm_util_ratio for p in dev.processes} == by_instance_by_pid(by_instance)
    assert sim.calls["nvmlGpmMigSampleGet"] == 4
    assert telemetry.view().errors_total == {}
    source.close()
    assert sim.gpm_samples == 0


def by_instance_by_pid(by_instance: dict[tuple[int, int], float]) -> dict[int, float]:
    return {pid: share for (pid, _), share in by_instance.items()}


def test_an_instance_without_gpm_keeps_its_processes_without_a_share() -> None:
    scenario = mig_gpu()
    for mig in scenario["mig"]:  # type: ignore[attr-defined]
        mig.pop("gpm")
    sim = SimulatedNvml(scenario_of(scenario))
    source, telemetry = source_on(sim)
    for t in range(3):
        dev = source.collect(1000.0 + t).devices[0]
    assert [m.gpm for m in dev.mig] == [None, None]
    assert {p.sm_util_ratio for p in dev.processes} == {None}
    assert sim.calls["nvmlGpmMigSampleGet"] == 2  # NOT_SUPPORTED once per instance, then not asked
    assert telemetry.view().errors_total == {}


def test_the_metric_ids_written_out_for_old_bindings_are_pynvmls() -> None:
    from falcon_gpu.sources.nvml.field_values import PCIE_TRAFFIC
    from falcon_gpu.sources.nvml.gpm import METRICS

    names = ("SM_UTIL", "SM_OCCUPANCY", "ANY_TENSOR_UTIL", "DRAM_BW_UTIL", "GRAPHICS_UTIL", "FP64_UTIL",
             "FP32_UTIL", "FP16_UTIL")  # fmt: skip
    assert tuple(getattr(pynvml, f"NVML_GPM_METRIC_{n}") for n in names) == METRICS
    assert [s.field_id for s in PCIE_TRAFFIC] == [
        pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES, pynvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES
    ]  # fmt: skip


def test_compute_instances_of_one_gpu_instance_share_its_activity() -> None:
    """GPM samples a GPU instance: its compute instances' processes split its activity between them."""

    def ci(n: int, pid: int) -> dict[str, object]:
        return {
            "gpu_instance_id": 3, "compute_instance_id": n, "profile": "1c.2g.20gb", "uuid": f"MIG-3-{n}",
            "memory_total_bytes": 20 << 30, "memory_used_bytes": 4 << 30, "gpm": {"sm_active_percent": 80},
            "processes": [{"pid": pid, "used_memory_bytes": 2 << 30}],
        }  # fmt: skip

    sim = SimulatedNvml(scenario_of(hopper(mig=[ci(0, 31), ci(1, 32)])))
    source, _ = source_on(sim)
    source.collect(1000.0)
    dev = source.collect(1001.0).devices[0]
    assert {p.pid: p.sm_util_ratio for m in dev.mig for p in m.processes} == {31: 0.4, 32: 0.4}
    assert {p.pid: p.sm_util_ratio for p in dev.processes} == {31: 0.4, 32: 0.4}
    assert sim.calls["nvmlGpmMigSampleGet"] == 2  # one GPU instance: one sample per cycle


def test_metrics_read_from_the_request_bytes_equal_the_struct_members() -> None:
    request = pynvml.c_nvmlGpmMetricsGet_t()
    for i, value in enumerate([63.0, 41.5, 22.0, 35.0, 70.0, 0.0, 30.25, 12.0]):
        request.metrics[i].metricId, request.metrics[i].value = i + 1, value
        request.metrics[i].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED if i == 5 else pynvml.NVML_SUCCESS
    got = gpm_module.reading(request)
    assert got == gpm_module.reading(request, from_bytes=False)
    assert got == GpmReading(0.63, 0.415, 0.22, 0.35, 0.70, None, 0.3025, 0.12)
    assert gpm_module._LAYOUT_OK  # the bytes path is the one taken on this machine


def test_a_hopper_gpu_with_every_reading_costs_ten_nvml_calls_per_cycle() -> None:
    """Issue 11's budget: the 8 calls of a GPU without GPM (``PER_CYCLE``) and GPM's sample and metrics."""
    steady = {**FULL, "encoder_percent": 0, "decoder_percent": 0, "clock_event_reasons": [],
              "name": "NVIDIA H100 80GB HBM3", "gpm": GPM}  # fmt: skip
    per_gpu, device, _ = _calls_per_gpu(steady)
    assert per_gpu == {**PER_CYCLE, "nvmlGpmSampleGet": 1, "nvmlGpmMetricsGet": 1}
    assert sum(per_gpu.values()) == 10
    assert device.gpm == expected(10)
