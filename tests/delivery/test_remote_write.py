"""remote_write against the real Prometheus and VictoriaMetrics, and its encoding."""

from __future__ import annotations

import json
import time
import urllib.parse
from pathlib import Path

import cramjam
import pytest

from falcon_gpu.model.samples import Family, PromBatch, Series
from falcon_gpu.sinks.config import RemoteWriteSinkConfig
from falcon_gpu.sinks.remote_write import RemoteWriteSink, encode_v2
from falcon_gpu.sinks.remote_write.encode_v1 import V1Encoder
from falcon_gpu.sinks.remote_write.labels import InvalidSeries, LabelCache
from falcon_gpu.sinks.remote_write.proto import remote_v1_pb2
from falcon_gpu.telemetry import Telemetry
from tests.delivery.conftest import (
    FakeRendered,
    HttpPeer,
    ManagedServer,
    http_get,
    outcomes,
    prom_cycle,
    prom_query,
)


def sink_for(url: str, tmp_path: Path, telemetry: Telemetry, **extra: object) -> RemoteWriteSink:
    cfg = RemoteWriteSinkConfig(
        type="remote_write",
        url=url,
        batch_max_age=0.001,
        retry_initial_delay=0.02,
        retry_max_delay=0.3,
        **extra,
    )  # type: ignore[arg-type]
    return RemoteWriteSink(cfg, spool_dir=tmp_path / "spool", spool_max_bytes=1 << 24, telemetry=telemetry)


def raw_samples(server: ManagedServer, selector: str) -> dict[str, list[tuple[int, float]]]:
    """Every raw sample of the last 10 minutes per gpu label, oldest first."""
    out = {}
    for r in prom_query(server, f"{selector}[10m]"):
        out[r["metric"]["gpu"]] = [(int(float(t) * 1000), float(v)) for t, v in r["values"]]
    return out


# -- encoding -----------------------------------------------------------------------------
def test_v1_body_parses_with_generated_code_sorted_and_grouped() -> None:
    labels = LabelCache()
    a = labels.series("m", (("uuid", "GPU-1"), ("gpu", "0"), ("UUID", "x")))
    assert a == (("UUID", "x"), ("__name__", "m"), ("gpu", "0"), ("uuid", "GPU-1")), "byte order sort"
    b = labels.series("m", (("gpu", "1"),))
    body = V1Encoder().encode([(a, 1000, 1.5), (b, 1000, -2.0), (a, 2000, 0.0), (a, 3000, float("inf"))])
    request = remote_v1_pb2.WriteRequest.FromString(bytes(cramjam.snappy.decompress_raw(body)))
    got = {
        tuple((lb.name, lb.value) for lb in ts.labels): [(s.timestamp, s.value) for s in ts.samples]
        for ts in request.timeseries
    }
    assert got == {a: [(1000, 1.5), (2000, 0.0), (3000, float("inf"))], b: [(1000, -2.0)]}


@pytest.mark.parametrize(
    ("name", "labels", "why"),
    [
        ("bad-name", (), "invalid metric name"),
        ("m", (("gpu", "0"), ("gpu", "1")), "appears twice"),
        ("m", (("__name__", "x"),), "appears twice"),
        ("m", (("1abc", "v"),), "invalid label name"),
        ("m", (("pod", ""),), "empty value"),
    ],
)
def test_invalid_series_are_refused_before_sending(
    name: str, labels: tuple[tuple[str, str], ...], why: str
) -> None:
    with pytest.raises(InvalidSeries, match=why):
        LabelCache().series(name, labels)


def test_v2_round_trip_keeps_samples_and_metadata() -> None:
    a = (("__name__", "falcon_gpu_energy_joules_total"), ("gpu", "0"))
    body = encode_v2.encode([(a, 1000, 5.0), (a, 2000, 6.0)], {a[0][1]: ("counter", "energy")})
    request = encode_v2.pb.Request.FromString(bytes(cramjam.snappy.decompress_raw(body)))
    assert request.symbols[0] == ""
    (ts,) = request.timeseries
    assert ts.metadata.type == encode_v2.pb.Metadata.METRIC_TYPE_COUNTER
    assert request.symbols[ts.metadata.help_ref] == "energy"
    assert encode_v2.decode(body) == [(a, 1000, 5.0), (a, 2000, 6.0)]


# -- real servers -------------------------------------------------------------------------
@pytest.mark.servers
def test_values_arrive_in_prometheus(prometheus: ManagedServer, tmp_path: Path, telemetry: Telemetry) -> None:
    sink = sink_for(prometheus.url + "/api/v1/write", tmp_path, telemetry)
    now = int(time.time() * 1000) - 5000
    for i, value in enumerate((0.73, 0.8, 0.64)):
        sink.submit(prom_cycle(now + i * 1000, value))
    assert sink.flush(15)
    sink.close(5)
    got = raw_samples(prometheus, "falcon_gpu_utilization_ratio")
    assert got == {
        "0": [(now, 0.73), (now + 1000, 0.8), (now + 2000, 0.64)],
        "1": [(now, 0.73 + 1), (now + 1000, 0.8 + 1), (now + 2000, 0.64 + 1)],
    }
    energy = prom_query(prometheus, 'falcon_gpu_energy_joules_total{gpu="1",node="node-a",uuid="GPU-1"}')
    assert [float(r["value"][1]) for r in energy] == [640.0]
    assert outcomes(telemetry, "remote_write") == {"sent": 12, "spooled": 0, "dropped": 0}


@pytest.mark.servers
def test_outage_every_sample_arrives_in_order(
    prometheus: ManagedServer, tmp_path: Path, telemetry: Telemetry
) -> None:
    sink = sink_for(prometheus.url + "/api/v1/write", tmp_path, telemetry)
    start = int(time.time() * 1000) - 30_000
    sink.submit(prom_cycle(start, 0.0))
    assert sink.flush(15)
    prometheus.stop()
    for i in range(1, 11):  # ten cycles while the receiver is down
        sink.submit(prom_cycle(start + i * 1000, i / 100))
    assert not sink.flush(1.0)
    assert outcomes(telemetry, "remote_write")["spooled"] > 0
    prometheus.start()
    for i in range(11, 13):  # and newer data after it is back
        sink.submit(prom_cycle(start + i * 1000, i / 100))
    assert sink.flush(30)
    sink.close(5)
    got = raw_samples(prometheus, "falcon_gpu_utilization_ratio")
    assert got["0"] == [(start + i * 1000, i / 100) for i in range(13)]
    assert got["1"] == [(start + i * 1000, 1 + i / 100) for i in range(13)]
    assert outcomes(telemetry, "remote_write")["dropped"] == 0
    assert outcomes(telemetry, "remote_write")["sent"] == 13 * 4
    assert "out of order" not in (tmp_path / "prometheus.log").read_text().lower()


@pytest.mark.servers
def test_version_2_falls_back_to_1_against_prometheus_2(
    prometheus: ManagedServer, tmp_path: Path, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    sink = sink_for(prometheus.url + "/api/v1/write", tmp_path, telemetry, version=2)
    now = int(time.time() * 1000) - 3000
    sink.submit(prom_cycle(now, 0.25))
    sink.submit(prom_cycle(now + 1000, 0.5))
    assert sink.flush(15)
    sink.close(5)
    got = raw_samples(prometheus, "falcon_gpu_utilization_ratio")
    assert got["0"] == [(now, 0.25), (now + 1000, 0.5)], "the batch sent as 2.0 was re-sent as 1.0"
    said = [r.message for r in caplog.records if "remote-write 2.0" in r.message]
    assert len(said) == 1 and "without X-Prometheus-Remote-Write-Samples-Written" in said[0]


def test_version_2_is_kept_when_the_receiver_confirms(
    http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry
) -> None:
    http_peer.default = (204, {"X-Prometheus-Remote-Write-Samples-Written": "4"}, b"")
    sink = sink_for(http_peer.url + "/api/v1/write", tmp_path, telemetry, version=2)
    now = int(time.time() * 1000)
    sink.submit(prom_cycle(now, 0.25))
    sink.submit(prom_cycle(now + 1000, 0.5))
    assert sink.flush(10)
    sink.close(5)
    assert http_peer.requests
    for req in http_peer.requests:
        assert req.headers["Content-Type"] == "application/x-protobuf;proto=io.prometheus.write.v2.Request"
        assert req.headers["X-Prometheus-Remote-Write-Version"] == "2.0.0"
        assert req.headers["Content-Encoding"] == "snappy"
    sent = [s for req in http_peer.requests for s in encode_v2.decode(req.body)]
    assert sorted((s[0][1][1], s[1], s[2]) for s in sent if s[0][2] == ("node", "node-a")) == [
        ("0", now, 0.25),
        ("0", now, 250.0),
        ("0", now + 1000, 0.5),
        ("0", now + 1000, 500.0),
        ("1", now, 1.25),
        ("1", now, 250.0),
        ("1", now + 1000, 1.5),
        ("1", now + 1000, 500.0),
    ]


def test_version_2_falls_back_on_415(http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry) -> None:
    http_peer.answers.append((415, {}, b"unsupported"))
    http_peer.default = (204, {}, b"")
    sink = sink_for(http_peer.url + "/api/v1/write", tmp_path, telemetry, version=2)
    sink.submit(prom_cycle(int(time.time() * 1000), 0.25))
    assert sink.flush(10)
    sink.close(5)
    first, second = http_peer.requests
    assert first.headers["X-Prometheus-Remote-Write-Version"] == "2.0.0"
    assert second.headers["X-Prometheus-Remote-Write-Version"] == "0.1.0"
    assert second.headers["Content-Type"] == "application/x-protobuf"
    assert outcomes(telemetry, "remote_write") == {"sent": 4, "spooled": 0, "dropped": 0}


def test_invalid_series_is_dropped_and_counted_others_sent(
    http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry
) -> None:
    http_peer.default = (204, {}, b"")
    bad = Family(
        "falcon_gpu_pod_info",
        "gauge",
        "",
        (Series((("pod", ""), ("gpu", "0")), 1.0), Series((("pod", "p"), ("gpu", "0")), 1.0)),
    )
    sink = sink_for(http_peer.url, tmp_path, telemetry)
    sink.submit(FakeRendered(PromBatch(int(time.time() * 1000), (bad,))))
    assert sink.flush(10)
    sink.close(5)
    assert outcomes(telemetry, "remote_write") == {"sent": 1, "spooled": 0, "dropped": 1}
    assert telemetry.view().errors_total["invalid_series"] == 1


@pytest.mark.servers
def test_values_arrive_in_victoria_metrics(
    victoria: ManagedServer, tmp_path: Path, telemetry: Telemetry
) -> None:
    sink = sink_for(victoria.url + "/api/v1/write", tmp_path, telemetry)
    now = int(time.time() * 1000) - 5000
    sink.submit(prom_cycle(now, 0.73))
    sink.submit(prom_cycle(now + 1000, 0.8))
    assert sink.flush(15)
    sink.close(5)
    http_get(victoria.url + "/internal/force_flush")
    query = urllib.parse.urlencode({"match[]": 'falcon_gpu_utilization_ratio{gpu="0"}'})
    lines = http_get(f"{victoria.url}/api/v1/export?{query}").decode().splitlines()
    (series,) = [json.loads(line) for line in lines]
    assert series["metric"] == {
        "__name__": "falcon_gpu_utilization_ratio",
        "gpu": "0",
        "node": "node-a",
        "uuid": "GPU-0",
    }
    assert series["values"] == [0.73, 0.8] and series["timestamps"] == [now, now + 1000]
    result = json.loads(
        http_get(
            f"{victoria.url}/api/v1/query?"
            + urllib.parse.urlencode(
                {"query": 'falcon_gpu_utilization_ratio{gpu="1"}', "time": str((now + 1000) / 1000)}
            )
        )
    )
    assert [float(r["value"][1]) for r in result["data"]["result"]] == [0.8 + 1]
