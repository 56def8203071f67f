"""doctor's sink checks (issue 8 item 12): each sink's write path, with a request that
changes nothing, against the real servers; only success passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks.base import Sink
from falcon_gpu.sinks.config import SinkConfig
from falcon_gpu.sinks.registry import build_sink
from tests.delivery.conftest import HttpPeer, ManagedServer, TransferServer, free_port, http_get, prom_query

pytestmark = pytest.mark.servers


def sink(tmp_path: Path, **cfg: Any) -> Sink:
    config = TypeAdapter(SinkConfig).validate_python({"timeout": 5, **cfg})
    return build_sink(
        config, node="n1", spool_dir=tmp_path / "spool", spool_max_bytes=1 << 20, telemetry=Telemetry()
    )


def check(s: Sink) -> tuple[bool, str]:
    try:
        return s.check()
    finally:
        s.close(1.0)


def test_remote_write_probe_posts_an_empty_write_request(tmp_path: Path, prometheus: ManagedServer) -> None:
    ok, detail = check(sink(tmp_path, type="remote_write", url=f"{prometheus.url}/api/v1/write"))
    assert ok and "HTTP 204" in detail, detail
    assert prom_query(prometheus, 'count({__name__=~".+"})') == []  # it stored nothing
    for wrong in ("/api/v1/writ", "/api/v1/query", "/"):
        ok, detail = check(sink(tmp_path, type="remote_write", url=f"{prometheus.url}{wrong}"))
        assert not ok and "HTTP" in detail, (wrong, detail)
    ok, detail = check(sink(tmp_path, type="remote_write", url=f"{prometheus.url}/api/v1/writ"))
    assert "HTTP 404" in detail and "wrong path" in detail


def test_pushgateway_probe_reads_the_status_api(tmp_path: Path, pushgateway: ManagedServer) -> None:
    ok, detail = check(sink(tmp_path, type="pushgateway", url=pushgateway.url))
    assert ok and "HTTP 200" in detail, detail
    doubled = f"{pushgateway.url}/metrics/job/falcon_gpu"
    ok, detail = check(sink(tmp_path, type="pushgateway", url=doubled))
    assert not ok, detail
    ok, detail = check(sink(tmp_path, type="pushgateway", url=f"{pushgateway.url}/wrong"))
    assert not ok and "HTTP 404" in detail, detail
    assert b"falcon_gpu" not in http_get(f"{pushgateway.url}/metrics")  # no group was pushed


def test_falcon_agent_probe_posts_an_empty_array_with_credentials(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("tok-123\n")
    peer = HttpPeer()
    try:
        ok, detail = check(
            sink(tmp_path, type="falcon_agent", url=f"{peer.url}/v1/push", bearer_token_file=str(token))
        )
        assert ok, detail
        (req,) = peer.requests
        assert (req.method, req.path, req.body) == ("POST", "/v1/push", b"[]")
        assert req.headers["Authorization"] == "Bearer tok-123"
        for status, needle in (
            (404, "wrong path"),
            (302, "redirects"),
            (400, "HTTP 400"),
            (401, "credentials"),
        ):
            peer.answers.append((status, {"Location": "http://elsewhere/"}, b"no"))
            ok, detail = check(sink(tmp_path, type="falcon_agent", url=f"{peer.url}/v1/push"))
            assert not ok and needle in detail, (status, detail)
        assert "tok-123" not in detail
    finally:
        peer.close()


def test_transfer_probe_calls_transfer_ping(tmp_path: Path, transfer: TransferServer) -> None:
    ok, detail = check(sink(tmp_path, type="falcon_transfer", address=transfer.address))
    assert ok and "Transfer.Ping" in detail, detail
    assert transfer.items() == []
    ok, detail = check(sink(tmp_path, type="falcon_transfer", address=f"127.0.0.1:{free_port()}"))
    assert not ok and "check address" in detail, detail
    peer = HttpPeer()  # something that is not transfer's RPC port
    try:
        ok, detail = check(
            sink(tmp_path, type="falcon_transfer", address=f"127.0.0.1:{peer.port}", timeout=2)
        )
        assert not ok, detail
    finally:
        peer.close()
