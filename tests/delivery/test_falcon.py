"""Open-Falcon: transfer's JSON-RPC (a real Go net/rpc server) and falcon-agent's /v1/push."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from falcon_gpu.model.samples import FalconItem, PromBatch
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks import falcon_agent, falcon_transfer
from falcon_gpu.sinks.base import Sink
from falcon_gpu.sinks.config import FalconAgentSinkConfig, FalconTransferSinkConfig
from falcon_gpu.sinks.context import SinkContext
from falcon_gpu.sinks.falcon_agent import parse_answer
from tests.delivery.conftest import (
    FakeRendered,
    HttpPeer,
    TransferServer,
    falcon_cycle,
    outcomes,
    wait_until,
)


def transfer_sink(address: str, tmp_path: Path, telemetry: Telemetry) -> Sink:
    cfg = FalconTransferSinkConfig(
        type="falcon_transfer",
        address=address,
        batch_max_age=0.001,
        retry_initial_delay=0.02,
        retry_max_delay=0.2,
        timeout=2,
    )
    return falcon_transfer.build(
        cfg, SinkContext(spool_dir=tmp_path / "spool", spool_max_bytes=1 << 20, telemetry=telemetry)
    )


def test_items_arrive_at_transfer_over_one_connection(
    transfer: TransferServer, tmp_path: Path, telemetry: Telemetry
) -> None:
    sink = transfer_sink(transfer.address, tmp_path, telemetry)
    for i in range(3):
        sink.submit(falcon_cycle(1_700_000_000 + 15 * i, 10.0 * i))
        assert sink.flush(10)
    sink.close(5)
    got = transfer.items()
    assert [(g["metric"], g["tags"], g["timestamp"], g["value"]) for g in got] == [
        ("GPUUtils", f"GpuId={n}", 1_700_000_000 + 15 * i, 10.0 * i + n) for i in range(3) for n in range(3)
    ]
    assert all(g["endpoint"] == "node-a" and g["step"] == 15 and g["counterType"] == "GAUGE" for g in got)
    assert outcomes(telemetry, "falcon_transfer") == {"sent": 9, "spooled": 0, "dropped": 0}


def test_invalid_items_are_counted_dropped(
    transfer: TransferServer, tmp_path: Path, telemetry: Telemetry
) -> None:
    items = (
        FalconItem("node-a", "GPUUtils", 1_700_000_000, 15, 1.0, "GAUGE", "GpuId=0"),
        FalconItem("node-a", "", 1_700_000_000, 15, 1.0, "GAUGE", ""),  # empty metric
        FalconItem("node-a", "X", 1_700_000_000, 0, 1.0, "GAUGE", ""),  # step 0
        FalconItem("node-a", "Y" * 500, 1_700_000_000, 15, 1.0, "GAUGE", "t=" + "z" * 20),
    )  # > 510
    sink = transfer_sink(transfer.address, tmp_path, telemetry)
    sink.submit(FakeRendered(PromBatch(0, ()), items))
    assert sink.flush(10)
    sink.close(5)
    assert [g["metric"] for g in transfer.items()] == ["GPUUtils"]
    assert outcomes(telemetry, "falcon_transfer") == {"sent": 1, "spooled": 0, "dropped": 3}


def test_reconnects_after_transfer_restart_and_delivers_the_outage(
    transfer: TransferServer, tmp_path: Path, telemetry: Telemetry
) -> None:
    sink = transfer_sink(transfer.address, tmp_path, telemetry)
    sink.submit(falcon_cycle(1_700_000_000, 1.0))
    assert sink.flush(10)
    transfer.stop()
    sink.submit(falcon_cycle(1_700_000_000 + 15, 1.0))
    wait_until(lambda: telemetry.view().errors_total.get("sink", 0) > 0, 10, "the outage to be noticed")
    for i in range(2, 4):  # one batch per cycle while transfer is down: each waits in the spool
        sink.submit(falcon_cycle(1_700_000_000 + 15 * i, float(i)))
        time.sleep(0.05)
    assert not sink.flush(0.5)
    transfer.start()
    assert sink.flush(15)
    sink.close(5)
    assert [(g["timestamp"], g["tags"]) for g in transfer.items()] == [
        (1_700_000_000 + 15 * i, f"GpuId={n}") for i in range(4) for n in range(3)
    ]
    assert outcomes(telemetry, "falcon_transfer") == {"sent": 12, "spooled": 9, "dropped": 0}


def test_a_codec_error_reply_is_permanent(tmp_path: Path, telemetry: Telemetry) -> None:
    """Transfer's Go codec refuses e.g. a float step with an error reply: drop, do not loop."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    sink = transfer_sink(f"127.0.0.1:{port}", tmp_path, telemetry)
    sink.submit(falcon_cycle(1_700_000_000, 1.0))
    conn, _ = server.accept()
    request = json.loads(conn.makefile("rb").readline())
    assert request["method"] == "Transfer.Update" and request["params"][0][0]["step"] == 15
    err = "json: cannot unmarshal number 1.5 into Go struct field MetricValue.step of type int64"
    conn.sendall(json.dumps({"id": request["id"], "result": None, "error": err}).encode() + b"\n")
    assert sink.flush(10)
    sink.close(2)
    conn.close()
    server.close()
    assert outcomes(telemetry, "falcon_transfer") == {"sent": 0, "spooled": 0, "dropped": 3}


def test_falcon_agent_push(http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry) -> None:
    cfg = FalconAgentSinkConfig(type="falcon_agent", url=http_peer.url + "/v1/push", batch_max_age=0.001)
    sink = falcon_agent.build(
        cfg, SinkContext(spool_dir=tmp_path, spool_max_bytes=1 << 20, telemetry=telemetry)
    )
    sink.submit(falcon_cycle(1_700_000_000, 5.0))
    assert sink.flush(10)
    sink.close(5)
    (req,) = http_peer.requests
    assert req.method == "POST" and req.path == "/v1/push"
    items = json.loads(req.body)
    assert items[0] == {
        "endpoint": "node-a",
        "metric": "GPUUtils",
        "timestamp": 1_700_000_000,
        "step": 15,
        "value": 5.0,
        "counterType": "GAUGE",
        "tags": "GpuId=0",
    }
    assert outcomes(telemetry, "falcon_agent") == {"sent": 3, "spooled": 0, "dropped": 0}


@pytest.mark.parametrize(
    ("answer", "rejected"),
    [
        ("success", 0),
        ('{"succ":3,"fail":0,"msg":"received"}', 0),
        ('{"err":"","dat":{"succ":1,"fail":2,"msg":""}}', 2),
    ],
)
def test_parse_answer(answer: str, rejected: int) -> None:
    assert parse_answer(answer).rejected == rejected


def test_check_for_doctor(transfer: TransferServer, tmp_path: Path, telemetry: Telemetry) -> None:
    sink = transfer_sink(transfer.address, tmp_path, telemetry)
    assert sink.check() == (True, f"transfer at {transfer.address} answers Transfer.Ping")
    transfer.stop()
    ok, detail = sink.check()
    assert not ok and detail.startswith(f"transfer {transfer.address}: ") and "check address" in detail
    sink.close(1)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_non_finite_value_is_dropped_alone_not_retried_forever(
    transfer: TransferServer, tmp_path: Path, telemetry: Telemetry, bad: float
) -> None:
    """JSON has no NaN: transfer's Go decoder would close the connection on the whole batch,
    and a resend of the same body would loop at the head of the spool for ever."""
    items = (
        FalconItem("node-a", "GPUUtils", 1_700_000_000, 15, 1.0, "GAUGE", "GpuId=0"),
        FalconItem("node-a", "PowerUsed", 1_700_000_000, 15, bad, "GAUGE", "GpuId=0"),
    )
    sink = transfer_sink(transfer.address, tmp_path, telemetry)
    sink.submit(FakeRendered(PromBatch(0, ()), items))
    assert sink.flush(10)
    sink.submit(falcon_cycle(1_700_000_015, 2.0))
    assert sink.flush(10)
    sink.close(5)
    assert [g["metric"] for g in transfer.items()] == ["GPUUtils"] * 4
    assert outcomes(telemetry, "falcon_transfer") == {"sent": 4, "spooled": 0, "dropped": 1}
    assert telemetry.view().errors_total["invalid_value"] == 1
