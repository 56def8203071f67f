"""remote_write against the real Prometheus and VictoriaMetrics, and its encoding."""

from __future__ import annotations

import json
import struct
import time
import urllib.parse
from pathlib import Path

import cramjam
import pytest

from falcon_gpu.model.samples import Family, PromBatch, Series
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import ConfigError, load_settings
from falcon_gpu.sinks import remote_write
from falcon_gpu.sinks.base import Sink
from falcon_gpu.sinks.config import RemoteWriteSinkConfig
from falcon_gpu.sinks.context import SinkContext
from falcon_gpu.sinks.remote_write import RemoteWritePusher, encode_v2
from falcon_gpu.sinks.remote_write.encode_v1 import V1Encoder
from falcon_gpu.sinks.remote_write.labels import InvalidSeries, LabelCache, Refused
from falcon_gpu.sinks.remote_write.proto import remote_v1_pb2
from tests.delivery.conftest import (
    FakeRendered,
    HttpPeer,
    ManagedServer,
    http_get,
    outcomes,
    prom_cycle,
    prom_query,
)


def sink_for(url: str, tmp_path: Path, telemetry: Telemetry, **extra: object) -> Sink:
    cfg = RemoteWriteSinkConfig(
        type="remote_write",
        url=url,
        batch_max_age=0.001,
        retry_initial_delay=0.02,
        retry_max_delay=0.3,
        **extra,
    )  # type: ignore[arg-type]
    return remote_write.build(
        cfg, SinkContext(spool_dir=tmp_path / "spool", spool_max_bytes=1 << 24, telemetry=telemetry)
    )


def decode_v1(body: bytes) -> list[tuple[tuple[tuple[str, str], ...], int, float]]:
    request = remote_v1_pb2.WriteRequest.FromString(bytes(cramjam.snappy.decompress_raw(body)))
    return [
        (tuple((lb.name, lb.value) for lb in ts.labels), s.timestamp, s.value)
        for ts in request.timeseries
        for s in ts.samples
    ]


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
    ],
)
def test_invalid_series_are_refused_before_sending(
    name: str, labels: tuple[tuple[str, str], ...], why: str
) -> None:
    with pytest.raises(InvalidSeries, match=why):
        LabelCache().series(name, labels)


def test_empty_values_are_left_out_and_job_instance_added_as_a_scrape_would() -> None:
    plain = LabelCache()
    assert plain.series("m", (("pod", ""), ("gpu", "0"))) == (("__name__", "m"), ("gpu", "0"))
    target = LabelCache(job="falcon_gpu", instance="node-a")
    assert target.series("m", (("gpu", "0"), ("job", "x"), ("container", ""))) == (
        ("__name__", "m"),
        ("exported_job", "x"),
        ("gpu", "0"),
        ("instance", "node-a"),
        ("job", "falcon_gpu"),
    )
    with pytest.raises(InvalidSeries, match="appears twice"):
        target.series("m", (("job", "x"), ("exported_job", "y")))


def test_a_refused_series_caches_its_reason_not_an_exception() -> None:
    """A cached exception re-raised every cycle grows its traceback and pins every cycle."""
    labels = LabelCache()
    first = labels.lookup("m", (("1abc", "v"),))
    assert isinstance(first, Refused) and "invalid label name '1abc'" in first
    assert labels.lookup("m", (("1abc", "v"),)) is first
    errors = []
    for _ in range(2):
        with pytest.raises(InvalidSeries) as info:
            labels.series("m", (("1abc", "v"),))
        errors.append(info.value)
    assert errors[0] is not errors[1], "a fresh exception each time"


def stale(value: float) -> bool:
    return struct.pack("<d", value) == struct.pack("<Q", 0x7FF0000000000002)


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
    energy = 'falcon_gpu_energy_joules_total{gpu="1",node="node-a",uuid="GPU-1",job="falcon_gpu"}'
    assert [float(r["value"][1]) for r in prom_query(prometheus, energy, at=now + 2000)] == [640.0]
    assert prom_query(prometheus, energy) == [], "marked stale at the clean shutdown"
    assert outcomes(telemetry, "remote_write") == {"sent": 12 + 4, "spooled": 0, "dropped": 0}


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
    assert outcomes(telemetry, "remote_write")["sent"] == 13 * 4 + 4, "and 4 markers at close"
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
    sent = [(dict(s[0]), s[1], s[2]) for req in http_peer.requests for s in encode_v2.decode(req.body)]
    assert all(stale(v) for lb, ts, v in sent if ts > now + 1000), "closed by markers at shutdown"
    assert len(sent) == 8 + 4
    assert sorted((lb["gpu"], ts, v) for lb, ts, v in sent if ts <= now + 1000) == [
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
    first, second, markers = http_peer.requests
    assert first.headers["X-Prometheus-Remote-Write-Version"] == "2.0.0"
    assert second.headers["X-Prometheus-Remote-Write-Version"] == "0.1.0"
    assert second.headers["Content-Type"] == "application/x-protobuf"
    assert markers.headers["X-Prometheus-Remote-Write-Version"] == "0.1.0", "1.0 for good"
    assert outcomes(telemetry, "remote_write") == {"sent": 4 + 4, "spooled": 0, "dropped": 0}


def test_invalid_series_is_dropped_and_counted_others_sent(
    http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    http_peer.default = (204, {}, b"")
    bad = Family(
        "falcon_gpu_pod_info",
        "gauge",
        "",
        (
            Series((("pod-name", "x"), ("gpu", "0")), 1.0),
            Series((("pod", "p"), ("gpu", "0")), 1.0),
            Series((("pod", ""), ("gpu", "1")), 1.0),
        ),
    )
    sink = sink_for(http_peer.url, tmp_path, telemetry)
    now = int(time.time() * 1000)
    for i in range(3):  # refused every cycle: logged once
        sink.submit(FakeRendered(PromBatch(now + i, (bad,))))
    assert sink.flush(10)
    assert outcomes(telemetry, "remote_write") == {"sent": 6, "spooled": 0, "dropped": 3}
    assert telemetry.view().errors_total["invalid_series"] == 3
    said = [r.message for r in caplog.records if "not sending an invalid series" in r.message]
    assert said == [
        "sink remote_write: not sending an invalid series: falcon_gpu_pod_info: invalid label name 'pod-name'"
    ]
    sent = {tuple(lb) for req in http_peer.requests for lb, _, _ in decode_v1(req.body)}
    assert sent == {
        (("__name__", "falcon_gpu_pod_info"), ("gpu", "0"), ("job", "falcon_gpu"), ("pod", "p")),
        (("__name__", "falcon_gpu_pod_info"), ("gpu", "1"), ("job", "falcon_gpu")),
    }
    sink.close(5)


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
        "job": "falcon_gpu",
        "gpu": "0",
        "node": "node-a",
        "uuid": "GPU-0",
    }
    assert series["values"][:2] == [0.73, 0.8] and series["timestamps"][:2] == [now, now + 1000]
    assert series["values"][2:] in ([], [None]), "at most the shutdown's staleness marker (exported as null)"
    result = json.loads(
        http_get(
            f"{victoria.url}/api/v1/query?"
            + urllib.parse.urlencode(
                {"query": 'falcon_gpu_utilization_ratio{gpu="1"}', "time": str((now + 1000) / 1000)}
            )
        )
    )
    assert [float(r["value"][1]) for r in result["data"]["result"]] == [0.8 + 1]


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ('job = ""', "'sinks.0.remote_write.job'"),
        ('instance = ""', "'sinks.0.remote_write.instance'"),
        ("stale_on_shutdown = 3", "'sinks.0.remote_write.stale_on_shutdown'"),
    ],
)
def test_bad_job_or_instance_names_the_setting(tmp_path: Path, toml: str, needle: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[[sinks]]\ntype = "remote_write"\n{toml}\n')
    with pytest.raises(ConfigError) as err:
        load_settings(cfg)
    assert needle in str(err.value)


def test_job_and_instance_default_to_falcon_gpu_and_the_node(tmp_path: Path, telemetry: Telemetry) -> None:
    from falcon_gpu.sinks.registry import build_sink

    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'node = "gpu-node-7"\n[[sinks]]\ntype = "remote_write"\n'
        '[[sinks]]\ntype = "remote_write"\nname = "b"\njob = "gpus"\ninstance = "10.0.0.7:9400"\n'
    )
    settings = load_settings(cfg)
    labels = []
    for config in settings.sinks:
        sink = build_sink(
            config, node=settings.node, spool_dir=tmp_path, spool_max_bytes=1 << 20, telemetry=telemetry
        )
        pusher = sink.sink  # type: ignore[attr-defined]
        assert isinstance(pusher, RemoteWritePusher)
        ((lb, _, _),) = pusher.explode(
            FakeRendered(PromBatch(1, (Family("m", "gauge", "", (Series((), 1.0),)),)))
        )
        labels.append(lb)
        sink.close(1)
    assert labels == [
        (("__name__", "m"), ("instance", "gpu-node-7"), ("job", "falcon_gpu")),
        (("__name__", "m"), ("instance", "10.0.0.7:9400"), ("job", "gpus")),
    ]
