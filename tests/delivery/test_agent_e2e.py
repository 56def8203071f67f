"""The real agent (``falcon-gpu run --simulate``) into the real servers: values, outage, crash."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.simulator.scenario.parse import resolve_scenario
from tests.delivery.conftest import ManagedServer, http_get, prom_query, wait_until

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.servers


@pytest.fixture(scope="module")
def gpu0() -> dict[str, Any]:
    scenario = json.loads(resolve_scenario("default").read_text())
    return dict(scenario["gpus"][0])


def write_config(tmp_path: Path, sinks: list[dict[str, Any]]) -> Path:
    lines = ['node = "e2e-node"', "interval = 1", f'spool_dir = "{tmp_path / "spool"}"']
    for sink in sinks:
        lines.append("[[sinks]]")
        lines.extend(f"{k} = {json.dumps(v)}" for k, v in sink.items())
    path = tmp_path / "falcon-gpu.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def start_agent(config: Path, log: Path, scenario: str = "default") -> subprocess.Popen[bytes]:
    with log.open("ab") as fh:
        argv = [
            sys.executable,
            "-m",
            "falcon_gpu",
            "run",
            "--simulate",
            scenario,
            "--config",
            str(config),
            "--interval",
            "1",
        ]
        return subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)


def stop_agent(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(60)


def util_samples(prometheus: ManagedServer, uuid: str) -> list[tuple[float, float]]:
    result = prom_query(prometheus, f'falcon_gpu_utilization_ratio{{uuid="{uuid}"}}[10m]')
    return [(float(t), float(v)) for r in result for t, v in r["values"]]


def test_scenario_values_reach_prometheus_victoria_and_pushgateway(
    prometheus: ManagedServer,
    victoria: ManagedServer,
    pushgateway: ManagedServer,
    tmp_path: Path,
    gpu0: dict[str, Any],
) -> None:
    rw = {"retry_max_delay": 0.5}
    config = write_config(
        tmp_path,
        [
            {"type": "remote_write", "url": prometheus.url + "/api/v1/write", **rw},
            {"type": "remote_write", "name": "victoria", "url": victoria.url + "/api/v1/write", **rw},
            {"type": "pushgateway", "url": pushgateway.url},
        ],
    )
    agent = start_agent(config, tmp_path / "agent.log")
    try:
        wait_until(lambda: len(util_samples(prometheus, gpu0["uuid"])) >= 5, 60, "five cycles in Prometheus")
    finally:
        assert stop_agent(agent) == 0, (tmp_path / "agent.log").read_text()

    uuid = gpu0["uuid"]
    expected = [u / 100 for u in gpu0["utilization_gpu_percent"]]  # 73 % -> 0.73, one per cycle
    samples = util_samples(prometheus, uuid)
    values = [v for _, v in samples]
    assert values[:4] == expected and set(values[4:]) == {expected[-1]}
    memory = prom_query(prometheus, f'falcon_gpu_memory_used_bytes{{uuid="{uuid}",node="e2e-node"}}[10m]')
    assert [float(v) for _, v in memory[0]["values"]][:4] == [float(b) for b in gpu0["memory_used_bytes"]]
    # the agent has stopped: its series are marked stale, so read the last sample in the range
    sent = prom_query(
        prometheus, 'last_over_time(falcon_gpu_agent_samples_total{sink="remote_write",outcome="sent"}[10m])'
    )
    assert sent and float(sent[0]["value"][1]) > 0

    query = urllib.parse.urlencode({"match[]": f'falcon_gpu_utilization_ratio{{uuid="{uuid}"}}'})

    def exported() -> list[dict[str, Any]]:
        http_get(victoria.url + "/internal/force_flush")
        lines = http_get(f"{victoria.url}/api/v1/export?{query}").decode().splitlines()
        out = [json.loads(x) for x in lines]
        for row in out:  # the staleness marker sent at shutdown is exported as null: not a sample
            kept = [(t, v) for t, v in zip(row["timestamps"], row["values"], strict=True) if v is not None]
            row["timestamps"], row["values"] = [t for t, _ in kept], [v for _, v in kept]
        return out

    # VictoriaMetrics makes fresh rows searchable within about a second
    wait_until(
        lambda: len(exported()) == 1 and len(exported()[0]["values"]) == len(samples),
        10,
        "every sample in VictoriaMetrics",
    )
    (series,) = exported()
    assert series["values"] == values
    assert [t / 1000 for t in series["timestamps"]] == [t for t, _ in samples], "same samples as Prometheus"

    text = http_get(pushgateway.url + "/metrics").decode()
    (line,) = [x for x in text.splitlines() if x.startswith("falcon_gpu_utilization_ratio{") and uuid in x]
    assert 'job="falcon_gpu"' in line and 'node="e2e-node"' in line
    assert float(line.rsplit(" ", 1)[1]) == values[-1], "the newest state"


def test_outage_then_agent_crash_the_spool_is_delivered_in_order(
    prometheus: ManagedServer, tmp_path: Path, gpu0: dict[str, Any]
) -> None:
    config = write_config(
        tmp_path, [{"type": "remote_write", "url": prometheus.url + "/api/v1/write", "retry_max_delay": 0.5}]
    )
    uuid = gpu0["uuid"]
    agent = start_agent(config, tmp_path / "agent.log")
    try:
        wait_until(lambda: len(util_samples(prometheus, uuid)) >= 2, 60, "two cycles in Prometheus")
        prometheus.stop()
        outage_from = time.time()
        time.sleep(5)  # about five cycles go to the spool only
        killed_at = time.time()
        agent.send_signal(signal.SIGKILL)
        agent.wait(10)
    finally:
        if agent.poll() is None:
            agent.kill()
    segments = list((tmp_path / "spool" / "remote_write").glob("*.seg"))
    assert segments, "the outage was spooled"

    prometheus.start()
    agent = start_agent(config, tmp_path / "agent.log")
    try:
        wait_until(
            lambda: any(t > killed_at + 1 for t, _ in util_samples(prometheus, uuid)),
            60,
            "the restarted agent's cycles",
        )
    finally:
        assert stop_agent(agent) == 0

    stamps = [t for t, _ in util_samples(prometheus, uuid)]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    during = [t for t in stamps if outage_from <= t <= killed_at]
    # one cycle a second; the batcher may still hold the last one when the agent is killed
    assert len(during) >= int(killed_at - outage_from) - 2, (during, outage_from, killed_at)
    assert "out of order" not in (tmp_path / "prometheus.log").read_text().lower()
    assert "out of order" not in (tmp_path / "agent.log").read_text().lower()
