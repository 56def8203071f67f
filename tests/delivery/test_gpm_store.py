"""GPM, PCIe and NVLink readings through remote_write into the real Prometheus, several cycles of the
real code path (simulated NVML, NVML source, health, both Prometheus schemas, the remote_write sink):
what Prometheus holds is what the scenario said, from the second cycle (GPM needs two samples); the
pre-Hopper GPU has none of these series; and a PCIe counter that resets (a driver reload) is a reset
to Prometheus: ``resets()`` counts it and ``rate()`` over it is never negative."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.agent.cycle import CycleRunner
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.simulator.scenario.parse import parse_scenario
from falcon_gpu.sources.nvml.library import load_nvml
from falcon_gpu.sources.nvml.source import NvmlSource
from tests.delivery.conftest import ManagedServer, prom_query
from tests.delivery.test_remote_write import sink_for

pytestmark = pytest.mark.servers
STEP = 15
CYCLES = 6
TENSOR = [5, 22, 30, 41, 12, 18]
SM = [10, 63, 70, 81, 40, 55]
PCIE_TX = [1.0e12, 1.0015e12, 1.003e12, 4.5e9, 6.0e9, 7.5e9]
"""1.5 GB per cycle; the driver reloads before the fourth cycle (the counter starts again)."""

SCENARIO = {
    "gpus": [
        {
            "uuid": "GPU-hopper", "name": "NVIDIA H100 80GB HBM3", "temperature_celsius": 50,
            "gpm": {"sm_active_percent": SM, "tensor_active_percent": TENSOR, "dram_active_percent": 35},
            "pcie": {"tx_bytes": PCIE_TX, "rx_bytes": 2.0e9},
            "nvlink": [{"link": 0, "tx_bytes": [1024 * 1000 * i for i in range(CYCLES)], "rx_bytes": 0,
                        "replay_errors": 0}],
        },
        {"uuid": "GPU-ampere", "name": "NVIDIA A100-SXM4-40GB", "temperature_celsius": 40,
         "pcie": {"tx_bytes": 1.0e9, "rx_bytes": 2.0e9}},
    ]
}  # fmt: skip


class Clock:
    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fed(prometheus: ManagedServer, tmp_path: Path) -> Iterator[tuple[ManagedServer, int]]:
    """Prometheus after CYCLES cycles of each schema, STEP seconds apart, ending 15 s ago."""
    start = int(time.time()) - STEP * CYCLES
    for schema in ("falcon_gpu", "dcgm"):
        telemetry = Telemetry()
        clock = Clock(float(start))
        sink = sink_for(prometheus.url + "/api/v1/write", tmp_path / schema, telemetry)
        source = NvmlSource(
            load_nvml(parse_scenario(json.loads(json.dumps(SCENARIO)))), telemetry, clock=clock
        )
        runner = CycleRunner(
            node=f"node-{schema}", step=STEP, source=source, attributor=None, sinks=[sink],
            telemetry=telemetry, schema=schema, clock=clock,  # type: ignore[arg-type]
        )  # fmt: skip
        for i in range(CYCLES):
            clock.now = float(start + i * STEP)
            runner.run()
        assert sink.flush(15)
        sink.close(0)  # no staleness markers: the queries below look at the written samples
        source.close()
    yield prometheus, start


def raw(server: ManagedServer, selector: str, at: int) -> dict[str, list[float]]:
    """Per ``gpu`` label: the raw values of the series (oldest first) up to ``at`` seconds."""
    out: dict[str, list[float]] = {}
    for r in prom_query(server, f"{selector}[{STEP * (CYCLES + 1)}s]", at=at * 1000):
        out[r["metric"]["gpu"]] = [float(v) for _, v in r["values"]]
    return out


def values(result: list[dict[str, Any]]) -> list[float]:
    return [float(r["value"][1]) for r in result]


def test_gpm_values_in_prometheus_are_the_scenarios_from_the_second_cycle(
    fed: tuple[ManagedServer, int],
) -> None:
    server, start = fed
    end = start + STEP * (CYCLES - 1)
    assert raw(server, 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{Hostname="node-dcgm"}', end) == {
        "0": [v / 100 for v in TENSOR[1:]]  # ratios 0-1, as dcgm-exporter's; none on the first cycle
    }
    assert raw(server, 'falcon_gpu_sm_active_ratio{node="node-falcon_gpu"}', end) == {
        "0": [v / 100 for v in SM[1:]]
    }
    assert raw(server, 'DCGM_FI_PROF_DRAM_ACTIVE{Hostname="node-dcgm"}', end) == {"0": [0.35] * (CYCLES - 1)}
    # the A100 answers no GPM: none of these series, while its other readings arrive
    for metric in (
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "falcon_gpu_tensor_active_ratio",
    ):
        assert prom_query(server, f'{metric}{{gpu="1"}}', at=end * 1000) == [], metric
    assert values(prom_query(server, 'DCGM_FI_DEV_GPU_TEMP{gpu="1"}', at=end * 1000)) == [40.0]


def test_a_pcie_counter_reset_is_a_reset_to_prometheus_never_a_negative_rate(
    fed: tuple[ManagedServer, int],
) -> None:
    server, start = fed
    end = start + STEP * (CYCLES - 1)
    counter = 'falcon_gpu_pcie_transmit_bytes_total{node="node-falcon_gpu",gpu="0"}'
    assert raw(server, counter, end) == {"0": PCIE_TX}
    window = f"{STEP * CYCLES}s"
    assert values(prom_query(server, f"resets({counter}[{window}])", at=end * 1000)) == [1.0]
    for at in range(start + 2 * STEP, end + 1, STEP):  # every window, the reset's among them
        (rate,) = values(prom_query(server, f"rate({counter}[{2 * STEP + 1}s])", at=at * 1000))
        assert rate >= 0, (at, rate)
    # the dcgm rate: bytes per second between cycles, absent on the first cycle and over the reset
    assert raw(server, 'DCGM_FI_PROF_PCIE_TX_BYTES{Hostname="node-dcgm",gpu="0"}', end) == {
        "0": [1.5e9 / STEP, 1.5e9 / STEP, 1.5e9 / STEP, 1.5e9 / STEP],
    }
    nvlink = 'DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{Hostname="node-dcgm"}'
    assert raw(server, nvlink, end) == {"0": [1024 * 1000.0 * i for i in range(CYCLES)]}
