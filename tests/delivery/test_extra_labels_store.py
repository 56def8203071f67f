"""The ``labels`` setting reaches a real Prometheus over remote_write and a real Pushgateway on
every series, and the per-node allocatable series with it (CONTRACT sections 2 and 4)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.delivery.conftest import ManagedServer, http_get, prom_query

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.servers


def test_every_series_in_the_store_carries_the_labels(
    prometheus: ManagedServer, pushgateway: ManagedServer, tmp_path: Path
) -> None:
    config = tmp_path / "falcon-gpu.toml"
    sinks = [
        {"type": "remote_write", "url": prometheus.url + "/api/v1/write", "retry_max_delay": 0.5},
        {"type": "pushgateway", "url": pushgateway.url},
    ]
    lines = [
        'node = "store-node"',
        f'spool_dir = "{tmp_path / "spool"}"',
        'labels = {cluster = "prod-a", region = "eu-west-1"}',
    ]
    for sink in sinks:
        lines += ["[[sinks]]", *(f"{k} = {json.dumps(v)}" for k, v in sink.items())]
    config.write_text("\n".join(lines) + "\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "falcon_gpu",
            "run",
            "--simulate",
            "shared-gpu",
            "--once",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    every = prom_query(prometheus, 'count({__name__=~"falcon_gpu_.+"})')
    labelled = prom_query(
        prometheus, 'count({__name__=~"falcon_gpu_.+", cluster="prod-a", region="eu-west-1"})'
    )
    assert every and float(every[0]["value"][1]) > 100
    assert labelled[0]["value"][1] == every[0]["value"][1]
    allocatable = prom_query(prometheus, 'falcon_gpu_allocatable_devices{cluster="prod-a"}')
    assert {r["metric"]["resource"]: float(r["value"][1]) for r in allocatable} == {
        "nvidia.com/gpu": 3.0,
        "nvidia.com/gpu.shared": 1.0,
    }
    pushed = [
        line
        for line in http_get(pushgateway.url + "/metrics").decode().splitlines()
        if line.startswith("falcon_gpu_")
    ]
    assert len(pushed) > 100
    assert all('cluster="prod-a"' in line and 'region="eu-west-1"' in line for line in pushed), [
        line for line in pushed if "cluster" not in line
    ][:3]
