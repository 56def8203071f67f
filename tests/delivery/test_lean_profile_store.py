"""The default profile over time, in the real Prometheus: a check's series exists only while it fails.

The real agent (``falcon-gpu run``, its default ``[metrics] profile``) runs a two-GPU scenario
into Prometheus through remote_write. GPU 0's volatile uncorrectable ECC count is 0, then 2 for
four cycles, then 0 again (a reset cleared it): its ``ecc`` check fails for those cycles and passes
after. GPU 1 is healthy throughout. In the store:

- ``falcon_gpu_health{check="ecc"}`` of GPU 0 appears with 2 and, once the check passes, is gone at
  once (the sink's staleness marker: an instant query no longer finds it), and its ECC counter with it;
- ``falcon_gpu_health_worst`` of GPU 0 reads 0, then 2, then 0 again, never absent;
- GPU 1 has ``health_worst`` 0 throughout and no ``falcon_gpu_health`` series at all.

With ``profile = "full"`` the same agent writes every check, 0 included, all the time.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.delivery.conftest import ManagedServer, prom_query, wait_until
from tests.delivery.test_agent_e2e import start_agent, stop_agent

pytestmark = pytest.mark.servers

GPU0, GPU1 = "GPU-1ea7e000-0000-4000-8000-000000000000", "GPU-1ea7e000-0000-4000-8000-000000000001"
FAILING = (3, 7)  # cycles 3..6: 2 uncorrectable errors
TAIL = 30  # cycles of each list: the agent runs well past the failing ones


def _gpu(uuid: str, index: int, ecc: list[int]) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "name": "NVIDIA H100 80GB HBM3",
        "pci_bus_id": f"00000000:{0x18 + index:02X}:00.0",
        "memory_total_bytes": 85520809984,
        "memory_used_bytes": 1e9,
        "utilization_gpu_percent": 10,
        "temperature_celsius": 40,
        "power_watts": 100,
        "energy_joules": [1000 + 100 * i for i in range(TAIL)],
        "ecc": {"corrected_volatile": 0, "uncorrected_volatile": ecc, "corrected_aggregate": 0},
        "retired_pages": {"single_bit": 0, "double_bit": 0, "pending": False},
        "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failed": False},
        "clock_event_reasons": [],
        "processes": [],
    }


def _scenario(path: Path) -> Path:
    ecc = [2 if FAILING[0] <= i < FAILING[1] else 0 for i in range(TAIL)]
    gpus = [_gpu(GPU0, 0, ecc), _gpu(GPU1, 1, [0])]
    path.write_text(json.dumps({"driver_version": "550.54.15", "cuda_version": "12.4", "gpus": gpus}))
    return path


def _run(prometheus: ManagedServer, tmp_path: Path, profile: str) -> tuple[list[Any], float]:
    """Run the agent until GPU 0 has failed and passed again; the check's and the summary's samples."""
    config = tmp_path / "falcon-gpu.toml"
    config.write_text(
        f'node = "lean-node"\ninterval = 1\nspool_dir = "{tmp_path / "spool"}"\n'
        f'[metrics]\nprofile = "{profile}"\n'
        f'[[sinks]]\ntype = "remote_write"\nurl = "{prometheus.url}/api/v1/write"\n'
    )
    proc = start_agent(config, tmp_path / "agent.log", str(_scenario(tmp_path / "scenario.json")))
    ecc = f'falcon_gpu_health{{uuid="{GPU0}",check="ecc"}}'
    try:

        def failing() -> bool:
            return [r["value"][1] for r in prom_query(prometheus, ecc)] == ["2"]

        def passing() -> bool:
            return [r["value"][1] for r in prom_query(prometheus, ecc)] in ([], ["0"])

        wait_until(failing, 60, "GPU 0's ecc check failing in the store")
        wait_until(passing, 60, "GPU 0's ecc check passing again")
        time.sleep(2)
        ended = time.time()
    finally:
        assert stop_agent(proc) == 0, (tmp_path / "agent.log").read_text()[-3000:]
    return prom_query(prometheus, '{__name__=~"falcon_gpu_health.*"}[5m]', int(ended * 1000)), ended


def _values(result: list[Any], uuid: str, name: str, check: str = "") -> list[float]:
    return [
        float(v)
        for r in result
        if r["metric"]["__name__"] == name
        and r["metric"]["uuid"] == uuid
        and r["metric"].get("check", "") == check
        for _, v in r["values"]
    ]


def _runs(values: list[float]) -> list[float]:
    """The values with repeats folded: [0, 0, 2, 2, 0] -> [0, 2, 0]."""
    return [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]


def test_a_failing_check_is_a_series_only_while_it_fails(prometheus: ManagedServer, tmp_path: Path) -> None:
    result, ended = _run(prometheus, tmp_path, "default")
    assert _runs(_values(result, GPU0, "falcon_gpu_health", "ecc")) == [2.0]
    assert len(_values(result, GPU0, "falcon_gpu_health", "ecc")) == FAILING[1] - FAILING[0]
    assert _runs(_values(result, GPU0, "falcon_gpu_health_worst")) == [0.0, 2.0, 0.0]
    assert _runs(_values(result, GPU1, "falcon_gpu_health_worst")) == [0.0]
    # GPU 1 never had a check series; GPU 0 only the failing one
    checks = {(r["metric"]["uuid"], r["metric"]["check"]) for r in result if "check" in r["metric"]}
    assert checks == {(GPU0, "ecc")}
    # gone, not left at its last value: the check and the ECC counter it counted (0 again)
    at = int(ended * 1000)
    assert prom_query(prometheus, f'falcon_gpu_health{{uuid="{GPU0}"}}', at) == []
    assert prom_query(prometheus, f'falcon_gpu_ecc_errors_total{{uuid="{GPU0}"}}', at) == []


def test_the_full_profile_writes_every_check_all_the_time(prometheus: ManagedServer, tmp_path: Path) -> None:
    result, _ = _run(prometheus, tmp_path, "full")
    assert _runs(_values(result, GPU0, "falcon_gpu_health", "ecc")) == [0.0, 2.0, 0.0]
    assert _runs(_values(result, GPU1, "falcon_gpu_health", "ecc")) == [0.0]
    assert not _values(result, GPU0, "falcon_gpu_health_worst")
