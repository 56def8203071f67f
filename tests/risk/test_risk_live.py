"""GPUs at risk, live: a scenario this test writes, the real agent, a real Prometheus with the
shipped rules loaded (conf/prometheus/recording.yml and alerts.yml), and ``falcon-gpu doctor``.

Four GPUs on one node: healthy; correctable ECC climbing every cycle; one XID 79 in the first
cycle and nothing since; a failed row remap. The hour and day windows are in the promtool unit
test (conf/prometheus/tests/risk_test.yml); here the agent, the wire and the rules run together.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.delivery.conftest import ManagedServer, http_get, wait_until
from tests.deploy.live import ROOT, query, start_prometheus, stop, values

pytestmark = pytest.mark.servers

HEALTHY, CLIMBING, ONE_XID, REMAP_FAILED = (f"GPU-risk-{n}" for n in range(4))


def _gpu(index: int, uuid: str, **extra: Any) -> dict[str, Any]:
    gpu: dict[str, Any] = {
        "uuid": uuid,
        "name": "NVIDIA H100 80GB HBM3",
        "pci_bus_id": f"00000000:{0x18 + index:02X}:00.0",
        "memory_total_bytes": 85520809984,
        "memory_used_bytes": 1e9,
        "utilization_gpu_percent": 50,
        "power_watts": 300,
        "energy_joules": 1000,
        "ecc": {"corrected_volatile": 0, "uncorrected_volatile": 0, "corrected_aggregate": 0,
                "uncorrected_aggregate": 0},
        "retired_pages": {"single_bit": 0, "double_bit": 0, "pending": False},
        "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failed": False},
    }  # fmt: skip
    gpu.update(extra)
    return gpu


def scenario() -> dict[str, Any]:
    climbing = {"corrected_volatile": list(range(0, 600)), "uncorrected_volatile": 0,
                "corrected_aggregate": list(range(0, 600)), "uncorrected_aggregate": 0}  # fmt: skip
    failed = {"correctable": 0, "uncorrectable": 1, "pending": False, "failed": True}
    return {
        "driver_version": "550.54.15",
        "cuda_version": "12.4",
        "gpus": [
            _gpu(0, HEALTHY),
            _gpu(1, CLIMBING, ecc=climbing),
            _gpu(2, ONE_XID, xid_events=[{"cycle": 0, "xid": 79}]),
            _gpu(3, REMAP_FAILED, remapped_rows=failed),
        ],
    }


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ManagedServer, Path]]:
    root: Path = tmp_path_factory.mktemp("risk")
    path = root / "risk-node.json"
    path.write_text(json.dumps(scenario()))
    store = start_prometheus(root, "store", [])
    config = root / "agent.toml"
    config.write_text(
        f'node = "risk-node"\ninterval = 1\nspool_dir = "{root / "spool"}"\n'
        f'[[sinks]]\ntype = "remote_write"\nurl = "{store.url}/api/v1/write"\n'
    )
    with (root / "agent.log").open("ab") as log:
        agent = subprocess.Popen(
            [sys.executable, "-m", "falcon_gpu", "run", "--config", str(config), "--simulate", str(path)],
            stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
        )  # fmt: skip
    try:
        yield store, path
    finally:
        stop(agent)
        store.stop()


def scores(store: ManagedServer) -> dict[str, float]:
    return {k[0]: v for k, v in values(query(store, "gpu:falcon_gpu_risk_score:ratio"), "uuid").items()}


def test_a_failed_row_remap_is_a_drain_candidate_at_once(node: tuple[ManagedServer, Path]) -> None:
    store, _ = node

    def firing() -> bool:
        alerts = query(store, 'ALERTS{alertname="FalconGpuDrainCandidate", alertstate="firing"}')
        return bool(alerts)

    wait_until(firing, 40, "the drain candidate alert")
    alerts = query(store, 'ALERTS{alertname="FalconGpuDrainCandidate"}')
    assert {a["metric"]["uuid"] for a in alerts} == {REMAP_FAILED}
    assert scores(store)[REMAP_FAILED] == 1.0
    reasons = values(query(store, f'gpu:falcon_gpu_risk_reason:ratio{{uuid="{REMAP_FAILED}"}}'), "reason")
    assert reasons == {("row_remap_failure",): 1.0}
    everything = json.loads(http_get(f"{store.url}/api/v1/alerts"))["data"]["alerts"]
    (alert,) = [a for a in everything if a["labels"]["alertname"] == "FalconGpuDrainCandidate"]
    assert alert["annotations"]["reasons"] == "row_remap_failure=1.00 "
    described = f"NVIDIA H100 80GB HBM3 {REMAP_FAILED}: row_remap_failure 1.00;"
    assert alert["annotations"]["description"].startswith(described)


def test_climbing_ecc_ranks_above_a_healthy_gpu_and_one_old_xid(node: tuple[ManagedServer, Path]) -> None:
    store, _ = node

    def ranked() -> bool:
        got = scores(store)
        return len(got) == 4 and got[CLIMBING] > got[ONE_XID] > got[HEALTHY]

    wait_until(ranked, 40, "climbing ECC above one XID above healthy")
    got = scores(store)
    assert got[HEALTHY] == 0.0
    assert got[ONE_XID] == pytest.approx(0.5 / 3)  # one of the three that count fully, weight 0.5
    reasons = values(query(store, f'gpu:falcon_gpu_risk_reason:ratio{{uuid="{CLIMBING}"}}'), "reason")
    assert reasons.keys() == {("ecc_corrected_rate",)}


def test_doctor_lists_the_same_reasons(node: tuple[ManagedServer, Path]) -> None:
    _, path = node
    done = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "doctor", "--simulate", str(path)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    rows = {line.split()[2]: line for line in done.stdout.splitlines() if line[6:].startswith("GPU ")}
    assert "risk 1.00: row_remap_failure 1.00 (a drain candidate)" in rows["3"], done.stdout
    assert rows["0"].endswith(": healthy"), done.stdout
