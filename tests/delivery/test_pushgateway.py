"""Pushgateway: what its /metrics shows, latest-state semantics, grouping key, delete."""

from __future__ import annotations

import gzip
import time

import pytest

from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks import pushgateway
from falcon_gpu.sinks.base import Sink
from falcon_gpu.sinks.config import PushgatewaySinkConfig
from falcon_gpu.sinks.context import SinkContext
from falcon_gpu.sinks.pushgateway import group_url
from tests.delivery.conftest import HttpPeer, ManagedServer, http_get, outcomes, prom_cycle, wait_until


def sink_for(url: str, telemetry: Telemetry, node: str = "node-a", **extra: object) -> Sink:
    cfg = PushgatewaySinkConfig(
        type="pushgateway", url=url, retry_initial_delay=0.02, retry_max_delay=0.2, **extra
    )  # type: ignore[arg-type]
    return pushgateway.build(
        cfg, SinkContext(spool_dir="", spool_max_bytes=0, node=node, telemetry=telemetry)
    )


def metric_lines(server: ManagedServer, name: str) -> list[str]:
    text = http_get(server.url + "/metrics").decode()
    return sorted(line for line in text.splitlines() if line.startswith(name + "{"))


def test_group_url_encodes_values_that_need_it() -> None:
    assert (
        group_url("http://pg:9091/", "falcon_gpu", "node-1")
        == "http://pg:9091/metrics/job/falcon_gpu/node/node-1"
    )
    assert group_url("http://pg", "a/b", "") == "http://pg/metrics/job@base64/YS9i/node@base64/="
    assert group_url("http://pg", "j", "n o") == "http://pg/metrics/job/j/node/n%20o"


@pytest.mark.servers
def test_values_show_in_pushgateway_metrics(pushgateway: ManagedServer, telemetry: Telemetry) -> None:
    sink = sink_for(pushgateway.url, telemetry, gzip=True)
    sink.submit(prom_cycle(int(time.time() * 1000), 0.73))
    assert sink.flush(10)
    sink.close(5)
    assert metric_lines(pushgateway, "falcon_gpu_utilization_ratio") == [
        'falcon_gpu_utilization_ratio{gpu="0",instance="",job="falcon_gpu",node="node-a",uuid="GPU-0"} 0.73',
        'falcon_gpu_utilization_ratio{gpu="1",instance="",job="falcon_gpu",node="node-a",uuid="GPU-1"} 1.73',
    ]
    assert outcomes(telemetry, "pushgateway") == {"sent": 4, "spooled": 0, "dropped": 0}


@pytest.mark.servers
def test_outage_sends_only_the_newest_state_and_put_removes_vanished_series(
    pushgateway: ManagedServer, telemetry: Telemetry
) -> None:
    sink = sink_for(pushgateway.url, telemetry)
    now = int(time.time() * 1000)
    sink.submit(prom_cycle(now, 0.1, gpus=2))
    assert sink.flush(10)
    pushgateway.stop()
    for i in range(2, 6):
        sink.submit(prom_cycle(now + i * 1000, i / 10, gpus=2))
    time.sleep(0.5)
    sink.submit(prom_cycle(now + 9000, 0.9, gpus=1))  # GPU 1's pod ended: its series must go
    pushgateway.start()
    assert sink.flush(15)
    sink.close(5)
    assert metric_lines(pushgateway, "falcon_gpu_utilization_ratio") == [
        'falcon_gpu_utilization_ratio{gpu="0",instance="",job="falcon_gpu",node="node-a",uuid="GPU-0"} 0.9',
    ]


def test_no_backlog_is_replayed_and_no_timestamps_are_sent(http_peer: HttpPeer, telemetry: Telemetry) -> None:
    http_peer.answers.extend([(503, {}, b"down")] * 3)
    http_peer.default = (200, {}, b"")
    sink = sink_for(http_peer.url, telemetry, node="gpu/node")
    now = int(time.time() * 1000)
    for i in range(5):
        sink.submit(prom_cycle(now + i * 1000, i / 10))
    assert sink.flush(10)
    sink.close(5)
    ok = [r for r in http_peer.requests if r.method == "PUT"][-1]
    assert ok.path == "/metrics/job/falcon_gpu/node@base64/Z3B1L25vZGU="
    body = ok.body.decode()
    assert 'falcon_gpu_utilization_ratio{node="node-a",gpu="0",uuid="GPU-0"} 0.4\n' in body
    assert str(now) not in body, "Pushgateway refuses timestamps"
    assert len(http_peer.requests) <= 4 + 1, "only states, never a backlog of every cycle"
    bodies = {r.body for r in http_peer.requests[3:]}
    assert len(bodies) == 1


def test_delete_on_shutdown_and_gzip(http_peer: HttpPeer, telemetry: Telemetry) -> None:
    http_peer.default = (202, {}, b"")
    sink = sink_for(http_peer.url, telemetry, gzip=True, delete_on_shutdown=True)
    sink.submit(prom_cycle(int(time.time() * 1000), 0.5))
    wait_until(lambda: len(http_peer.requests) == 1, 10, "the PUT")
    sink.close(5)
    put, delete = http_peer.requests
    assert put.method == "PUT" and put.headers["Content-Encoding"] == "gzip"
    assert b"falcon_gpu_utilization_ratio" in gzip.decompress(put.body)
    assert delete.method == "DELETE" and delete.path == put.path == "/metrics/job/falcon_gpu/node/node-a"


def test_permanent_refusal_is_dropped_and_logged_once(
    http_peer: HttpPeer, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    http_peer.default = (400, {}, b"pushed metrics are invalid or inconsistent")
    sink = sink_for(http_peer.url, telemetry)
    for i in range(3):
        sink.submit(prom_cycle(int(time.time() * 1000) + i, 0.5))
        assert sink.flush(5)
    sink.close(5)
    assert outcomes(telemetry, "pushgateway")["dropped"] == 12
    assert len([r for r in caplog.records if "inconsistent" in r.message]) == 1
