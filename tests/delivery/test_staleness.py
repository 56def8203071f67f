"""Staleness markers: a series that stops is closed at once, in order, also across a crash.

The unit part reads what the sink sends (1.0 and 2.0); the rest runs the real agent
on a scenario whose GPU is lost and whose pod process ends mid-run, into the real
Prometheus (and VictoriaMetrics), once live and once through an outage, a SIGKILL
and a spool replay.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.model.samples import Family, PromBatch, Series
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.simulator.scenario.parse import resolve_scenario
from falcon_gpu.sinks.remote_write import encode_v2
from tests.delivery.conftest import (
    FakeRendered,
    HttpPeer,
    ManagedServer,
    http_get,
    outcomes,
    prom_cycle,
    prom_query,
    wait_until,
)
from tests.delivery.test_agent_e2e import ROOT, stop_agent, write_config
from tests.delivery.test_remote_write import decode_v1, sink_for, stale

LOST_AT = 3  # the L4 (gpus[3]) answers GPU_IS_LOST and pid 4250 of train-0 ends from this cycle on
LOST_GPU = "GPU-7f531e57-af1c-db41-1bdb-435573bbacb7"


# -- what the sink sends ----------------------------------------------------------------
@pytest.mark.parametrize("version", [1, 2])
def test_markers_close_vanished_and_changed_series_then_all_at_shutdown(
    version: int, http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry
) -> None:
    http_peer.default = (204, {"X-Prometheus-Remote-Write-Samples-Written": "1"}, b"")
    sink = sink_for(http_peer.url, tmp_path, telemetry, version=version)
    t0 = int(time.time() * 1000) - 10_000
    sink.submit(prom_cycle(t0, 0.5, gpus=2))
    sink.submit(prom_cycle(t0 + 1000, 0.6, gpus=1))  # GPU 1 lost
    renamed = Family(
        "falcon_gpu_utilization_ratio", "gauge", "", (Series((("gpu", "0"), ("pod", "p")), 0.7),)
    )
    sink.submit(FakeRendered(PromBatch(t0 + 2000, (renamed,))))  # a label set changed
    assert sink.flush(10)
    closed_at = int(time.time() * 1000)
    sink.close(5)
    decode = decode_v1 if version == 1 else encode_v2.decode
    samples: dict[tuple[tuple[str, str], ...], list[tuple[int, float]]] = defaultdict(list)
    for req in http_peer.requests:
        for labels, ts, value in decode(req.body):
            samples[tuple(labels)].append((ts, value))

    def of(name: str, gpu: str, **extra: str) -> list[tuple[int, str | float]]:
        labels = tuple(sorted({"__name__": name, "gpu": gpu, "job": "falcon_gpu", **extra}.items()))
        return [(ts, "stale" if stale(v) else v) for ts, v in samples.pop(labels)]

    util, energy = "falcon_gpu_utilization_ratio", "falcon_gpu_energy_joules_total"
    node = {"node": "node-a"}
    assert of(util, "1", uuid="GPU-1", **node) == [(t0, 1.5), (t0 + 1000, "stale")]
    assert of(energy, "1", uuid="GPU-1", **node) == [(t0, 500.0), (t0 + 1000, "stale")]
    assert of(util, "0", uuid="GPU-0", **node) == [(t0, 0.5), (t0 + 1000, 0.6), (t0 + 2000, "stale")]
    assert of(energy, "0", uuid="GPU-0", **node) == [(t0, 500.0), (t0 + 1000, 600.0), (t0 + 2000, "stale")]
    ((ts, value),) = [x for x in of(util, "0", pod="p")[1:]]
    assert value == "stale" and ts >= closed_at, "the series live at shutdown are closed"
    assert not samples
    assert outcomes(telemetry, "remote_write")["dropped"] == 0


# -- the real agent -------------------------------------------------------------------------
def losing_scenario(tmp_path: Path) -> Path:
    scenario = json.loads(resolve_scenario("mixed-4gpu").read_text())
    gpus: list[dict[str, Any]] = scenario["gpus"]
    assert gpus[3]["uuid"] == LOST_GPU
    gpus[3]["lost_at_cycle"] = LOST_AT
    (proc,) = [p for p in gpus[0]["processes"] if p["pid"] == 4250]
    proc["until_cycle"] = LOST_AT
    path = tmp_path / "losing.json"
    path.write_text(json.dumps(scenario))
    return path


def run_agent(tmp_path: Path, prometheus: ManagedServer, *more: ManagedServer) -> Any:
    """The agent on the losing scenario, into Prometheus and optionally VictoriaMetrics and a Pushgateway."""
    sinks: list[dict[str, Any]] = [
        {"type": "remote_write", "url": prometheus.url + "/api/v1/write", "retry_max_delay": 0.5}
    ]
    if more:
        victoria, pushgateway = more
        sinks.append({"type": "remote_write", "name": "vm", "url": victoria.url + "/api/v1/write"})
        sinks.append({"type": "pushgateway", "url": pushgateway.url})
    config = write_config(tmp_path, sinks)
    config.write_text(config.read_text().replace("interval = 1\n", "interval = 1\nprocess_metrics = true\n"))
    argv = [sys.executable, "-m", "falcon_gpu", "run", "--simulate", str(losing_scenario(tmp_path))]
    with (tmp_path / "agent.log").open("ab") as log:
        argv += ["--config", str(config)]
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)


POWER = f'falcon_gpu_power_watts{{uuid="{LOST_GPU}"}}'
PROCESS = 'falcon_gpu_process_memory_used_bytes{pod="train-0",pid="4250"}'
LIVE = 'falcon_gpu_process_memory_used_bytes{pod="train-0",pid="4242"}'


def stamps(server: ManagedServer, selector: str, at: int | None = None) -> list[int]:
    result = prom_query(server, f"{selector}[10m]", at=at)
    return sorted(round(float(t) * 1000) for r in result for t, _ in r["values"])


def present(server: ManagedServer, selector: str, at_ms: int | None) -> bool:
    return bool(prom_query(server, selector, at=at_ms))


@pytest.mark.servers
def test_a_lost_gpu_and_an_ended_process_vanish_one_interval_later(
    prometheus: ManagedServer, victoria: ManagedServer, pushgateway: ManagedServer, tmp_path: Path
) -> None:
    agent = run_agent(tmp_path, prometheus, victoria, pushgateway)
    try:
        wait_until(lambda: len(stamps(prometheus, LIVE)) >= LOST_AT + 2, 60, "cycles past the loss")
        for store in (prometheus, victoria):
            # each sink delivers on its own thread: on a loaded machine one store may be a write behind
            wait_until(lambda s=store: not present(s, POWER, None), 10, "the lost GPU gone, not in 5 minutes")
            wait_until(lambda s=store: not present(s, PROCESS, None), 10, "the ended process gone too")
            assert present(store, LIVE, None)
        pushed = http_get(pushgateway.url + "/metrics").decode()
        assert 'pid="4242"' in pushed and 'pid="4250"' not in pushed, "the Pushgateway holds the latest state"
        assert not [
            x for x in pushed.splitlines() if x.startswith("falcon_gpu_power_watts") and LOST_GPU in x
        ]
    finally:
        assert stop_agent(agent) == 0
    assert len(stamps(prometheus, POWER)) == LOST_AT
    assert not present(prometheus, LIVE, None), "closed at the clean shutdown"


def write_errors(prometheus: ManagedServer) -> dict[str, float]:
    """Prometheus's own count of remote-write requests answered with other than 2xx."""
    out = {}
    for line in http_get(prometheus.url + "/metrics").decode().splitlines():
        m = re.match(r'prometheus_http_requests_total\{code="(\d+)",handler="/api/v1/write"\} (\S+)', line)
        if m and not m.group(1).startswith("2"):
            out[m.group(1)] = float(m.group(2))
    return out


@pytest.mark.servers
def test_markers_replayed_after_an_outage_and_sigkill_follow_their_data(
    prometheus: ManagedServer, tmp_path: Path
) -> None:
    prometheus.stop()  # the whole first run goes to the spool only
    agent = run_agent(tmp_path, prometheus)
    started = time.time()
    time.sleep(LOST_AT + 2.5)  # past the loss: data, then markers, spooled
    agent.send_signal(signal.SIGKILL)
    agent.wait(10)
    killed_at = int(time.time() * 1000)
    prometheus.start()
    agent = run_agent(tmp_path, prometheus)
    try:
        wait_until(lambda: any(t > killed_at for t in stamps(prometheus, LIVE)), 60, "the restarted agent")
    finally:
        assert stop_agent(agent) == 0
    before = [t for t in stamps(prometheus, POWER) if t < killed_at]
    assert len(before) == LOST_AT and before[0] >= started * 1000, before
    last = before[-1]
    assert present(prometheus, POWER, last + 500), "the data arrived"
    assert not present(prometheus, POWER, last + 1600), "and the marker after it, one cycle later"
    ended = [t for t in stamps(prometheus, PROCESS) if t < killed_at]
    assert len(ended) >= LOST_AT - 1  # the first cycle may go out before the first attribution
    assert not present(prometheus, PROCESS, ended[-1] + 1600)
    assert present(prometheus, LIVE, ended[-1] + 1600), "the rest of the node is still there"
    assert write_errors(prometheus) == {}, "no write was rejected"
    log = (tmp_path / "agent.log").read_text().lower()
    assert "server refused" not in log and "dropped" not in log and "out of order" not in log


def test_stale_on_shutdown_false_leaves_the_last_cycle_visible(
    http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry
) -> None:
    http_peer.default = (204, {}, b"")
    sink = sink_for(http_peer.url, tmp_path, telemetry, stale_on_shutdown=False)
    t0 = int(time.time() * 1000)
    sink.submit(prom_cycle(t0, 0.5, gpus=2))
    sink.submit(prom_cycle(t0 + 1000, 0.6, gpus=1))
    sink.close(5)
    sent = [
        (dict(lb)["gpu"], ts, stale(v)) for req in http_peer.requests for lb, ts, v in decode_v1(req.body)
    ]
    assert sorted(x for x in sent if x[2]) == [("1", t0 + 1000, True)] * 2, (
        "only the vanished GPU's two series"
    )
    assert len(sent) == 4 + 2 + 2
