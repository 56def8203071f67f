"""How the shared delivery stages treat a server's answers, TLS and auth (HTTP peer)."""

from __future__ import annotations

import base64
import json
import logging
import shutil
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path

import pytest

from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks import falcon_agent, remote_write
from falcon_gpu.sinks.base import Sink
from falcon_gpu.sinks.config import FalconAgentSinkConfig, RemoteWriteSinkConfig
from falcon_gpu.sinks.context import SinkContext
from tests.delivery.conftest import HttpPeer, falcon_cycle, outcomes, prom_cycle, wait_until


def rw_sink(url: str, tmp_path: Path, telemetry: Telemetry, **extra: object) -> Sink:
    extra.setdefault("stale_on_shutdown", False)  # these tests count the requests of their cycles only
    cfg = RemoteWriteSinkConfig(
        type="remote_write",
        url=url,
        batch_max_age=0.001,
        retry_initial_delay=0.02,
        retry_max_delay=0.2,
        **extra,
    )  # type: ignore[arg-type]
    return remote_write.build(
        cfg, SinkContext(spool_dir=tmp_path / "spool", spool_max_bytes=1 << 20, telemetry=telemetry)
    )


def test_400_drops_the_batch_once_and_moves_on(
    http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    http_peer.answers.append((400, {}, b"out of order sample"))
    http_peer.default = (204, {}, b"")
    sink = rw_sink(http_peer.url + "/api/v1/write", tmp_path, telemetry)
    now = int(time.time() * 1000)
    sink.submit(prom_cycle(now, 0.5))
    assert sink.flush(10)
    sink.submit(prom_cycle(now + 1000, 0.6))
    assert sink.flush(10)
    sink.close(5)
    assert len(http_peer.requests) == 2, "a 400 is never retried"
    assert http_peer.requests[0].body != http_peer.requests[1].body
    assert outcomes(telemetry, "remote_write") == {"sent": 4, "spooled": 0, "dropped": 4}
    refusals = [r.message for r in caplog.records if "out of order sample" in r.message]
    assert len(refusals) == 1 and "HTTP 400" in refusals[0]


def test_500_is_retried_until_accepted(http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry) -> None:
    http_peer.answers.extend([(500, {}, b"boom"), (503, {}, b"busy")])
    http_peer.default = (204, {}, b"")
    sink = rw_sink(http_peer.url + "/api/v1/write", tmp_path, telemetry)
    sink.submit(prom_cycle(int(time.time() * 1000), 0.5))
    assert sink.flush(10)
    sink.close(5)
    assert len(http_peer.requests) == 3
    assert len({r.body for r in http_peer.requests}) == 1, "the same batch is sent again"
    assert outcomes(telemetry, "remote_write") == {"sent": 4, "spooled": 4, "dropped": 0}
    assert telemetry.view().errors_total["sink"] == 2


def test_429_with_retry_after_waits_that_long(
    http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry
) -> None:
    http_peer.answers.append((429, {"Retry-After": "2"}, b"slow down"))
    http_peer.default = (204, {}, b"")
    sink = rw_sink(http_peer.url + "/api/v1/write", tmp_path, telemetry)
    sink.submit(prom_cycle(int(time.time() * 1000), 0.5))
    assert sink.flush(10)
    sink.close(5)
    first, second = http_peer.requests
    assert second.at - first.at >= 2.0, "Retry-After: 2 must be honoured (backoff alone is 20-200 ms)"
    assert outcomes(telemetry, "remote_write")["sent"] == 4


def test_nightingale_fail_count_is_dropped(http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry) -> None:
    http_peer.default = (200, {"Content-Type": "application/json"}, b'{"succ":2,"fail":1,"msg":"received"}')
    cfg = FalconAgentSinkConfig(
        type="falcon_agent", url=http_peer.url + "/openfalcon/push", batch_max_age=0.001
    )
    sink = falcon_agent.build(
        cfg, SinkContext(spool_dir=tmp_path, spool_max_bytes=1 << 20, telemetry=telemetry)
    )
    sink.submit(falcon_cycle(1_700_000_000, 50.0))
    assert sink.flush(10)
    sink.close(5)
    (req,) = http_peer.requests
    assert req.path == "/openfalcon/push" and req.body.startswith(b"[{")
    assert outcomes(telemetry, "falcon_agent") == {"sent": 2, "spooled": 0, "dropped": 1}


# -- TLS and auth ---------------------------------------------------------------------
def make_ca_and_server_cert(tmp_path: Path) -> tuple[Path, Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, cwd=tmp_path, timeout=60)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=falcon-gpu test CA",
    )
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    )
    (tmp_path / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    run(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "1",
        "-extfile",
        "san.ext",
    )
    return tmp_path / "ca.pem", tmp_path / "server.pem", tmp_path / "server.key"


def https_peer(tmp_path: Path) -> tuple[HttpPeer, Path]:
    """A loopback HTTPS server with a certificate from a CA made here; returns it and the CA file."""
    ca, cert, key = make_ca_and_server_cert(tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return HttpPeer(tls=ctx), ca


def test_tls_with_own_ca_and_rotated_bearer_token(
    tmp_path: Path, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    peer, ca = https_peer(tmp_path)
    peer.default = (204, {}, b"")
    token = tmp_path / "token"
    token.write_text("s3cret-one\n")
    try:
        sink = rw_sink(
            peer.url + "/api/v1/write",
            tmp_path,
            telemetry,
            ca_file=ca,
            bearer_token_file=token,
            headers={"X-Scope-OrgID": "team-gpu"},
        )
        now = int(time.time() * 1000)
        sink.submit(prom_cycle(now, 0.1))
        assert sink.flush(10)
        # a rotated Kubernetes secret: the kubelet swaps in a new file (an in-place rewrite of the
        # same size within one coarse mtime tick would look unchanged: not what the kubelet does)
        (tmp_path / "token.new").write_text("s3cret-two\n")
        (tmp_path / "token.new").replace(token)
        sink.submit(prom_cycle(now + 1000, 0.2))
        assert sink.flush(10)
        sink.close(5)
    finally:
        peer.close()
    auth = [r.headers["Authorization"] for r in peer.requests]
    assert auth == ["Bearer s3cret-one", "Bearer s3cret-two"]
    assert all(r.headers["X-Scope-OrgID"] == "team-gpu" for r in peer.requests)
    assert outcomes(telemetry, "remote_write")["sent"] == 8
    assert "s3cret" not in caplog.text


def test_untrusted_certificate_is_retried_and_secret_stays_out_of_logs(
    tmp_path: Path, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    peer, _ = https_peer(tmp_path)
    token = tmp_path / "token"
    token.write_text("hunter2-token")
    caplog.set_level(logging.INFO)
    try:
        sink = rw_sink(peer.url + "/api/v1/write", tmp_path, telemetry, bearer_token_file=token)
        sink.submit(prom_cycle(int(time.time() * 1000), 0.1))
        wait_until(lambda: telemetry.view().errors_total.get("sink", 0) >= 2, 10, "failed TLS attempts")
        assert not sink.flush(0.2), "nothing can be delivered to an untrusted server"
        sink.close(0.5)
    finally:
        peer.close()
    assert outcomes(telemetry, "remote_write") == {"sent": 0, "spooled": 4, "dropped": 0}
    tls_lines = [r.message for r in caplog.records if "TLS error" in r.message]
    assert len(tls_lines) == 1, "logged once, not every retry"
    assert "hunter2" not in caplog.text
    assert "hunter2" not in repr(sink.__dict__)


def test_check_for_doctor(http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry) -> None:
    token = tmp_path / "token"
    token.write_text("doctor-secret")
    http_peer.answers.append((405, {}, b"method not allowed"))
    sink = rw_sink(http_peer.url + "/api/v1/write", tmp_path, telemetry, bearer_token_file=token)
    ok, detail = sink.check()
    assert not ok and "HTTP 405" in detail and "wrong path" in detail
    http_peer.answers.append((204, {}, b""))
    ok, detail = sink.check()
    assert ok and "HTTP 204" in detail
    http_peer.answers.append((401, {}, b"bad token"))
    ok, detail = sink.check()
    assert (
        not ok and "HTTP 401" in detail and "credentials refused" in detail and "doctor-secret" not in detail
    )
    assert http_peer.requests[-1].headers["Authorization"] == "Bearer doctor-secret"
    sink.close(1)
    closed = rw_sink("http://127.0.0.1:9/api/v1/write", tmp_path / "b", telemetry)
    ok, detail = closed.check()
    assert not ok and "cannot connect to http://127.0.0.1:9/api/v1/write" in detail
    closed.close(1)


def test_basic_auth_password_file_and_insecure_skip_verify(
    tmp_path: Path, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    peer, _ = https_peer(tmp_path)
    peer.default = (204, {}, b"")
    password = tmp_path / "password"
    password.write_text("pa55word\n")
    try:
        sink = rw_sink(
            peer.url + "/api/v1/write",
            tmp_path,
            telemetry,
            insecure_skip_verify=True,
            basic_auth_user="falcon",
            basic_auth_password_file=password,
        )
        sink.submit(prom_cycle(int(time.time() * 1000), 0.1))
        assert sink.flush(10)
        sink.close(5)
    finally:
        peer.close()
    (req,) = peer.requests
    assert req.headers["Authorization"] == "Basic " + base64.b64encode(b"falcon:pa55word").decode()
    warned = [r for r in caplog.records if "insecure_skip_verify" in r.message]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING
    assert "pa55word" not in caplog.text


def test_spool_cap_drops_the_oldest_and_counts_it(http_peer: HttpPeer, tmp_path: Path) -> None:
    down = Telemetry()
    cfg = FalconAgentSinkConfig(
        type="falcon_agent",
        url="http://127.0.0.1:9/v1/push",
        batch_max_age=0.001,
        retry_initial_delay=0.02,
        retry_max_delay=0.1,
    )
    sink = falcon_agent.build(cfg, SinkContext(spool_dir=tmp_path, spool_max_bytes=64 * 1024, telemetry=down))
    for i in range(300):  # ~150 KB of batches into a 64 KiB spool while nobody listens
        sink.submit(falcon_cycle(1_700_000_000 + 15 * i, float(i), n=4))
        sink.flush(0)
    sink.close(10)  # returns once all is spooled (the server is failing); a slow disk must not cut it short
    dropped = outcomes(down, "falcon_agent")["dropped"]
    assert dropped > 0 and dropped % 4 == 0
    assert 0 < down.view().spool_bytes["falcon_agent"] <= 64 * 1024
    assert down.view().errors_total["spool_full"] > 0

    up = Telemetry()
    http_peer.default = (200, {}, b"success")
    cfg = FalconAgentSinkConfig(type="falcon_agent", url=http_peer.url + "/v1/push", batch_max_age=0.001)
    again = falcon_agent.build(cfg, SinkContext(spool_dir=tmp_path, spool_max_bytes=64 * 1024, telemetry=up))
    assert again.flush(10)
    again.close(5)
    stamps = [item["timestamp"] for r in http_peer.requests for item in json.loads(r.body)][::4]
    assert stamps == sorted(stamps) and stamps[-1] == 1_700_000_000 + 15 * 299, "the newest data is kept"
    assert len(stamps) * 4 + dropped == 300 * 4, "what arrived plus what was counted dropped is everything"
    assert up.view().spool_bytes["falcon_agent"] == 0


def test_a_redirect_is_not_followed_into_a_false_success(
    http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry
) -> None:
    http_peer.answers.append((301, {"Location": http_peer.url + "/elsewhere"}, b""))
    sink = rw_sink(http_peer.url + "/api/v1/write", tmp_path, telemetry)
    sink.submit(prom_cycle(int(time.time() * 1000), 0.5))
    assert sink.flush(10)
    sink.close(5)
    assert [r.method for r in http_peer.requests] == ["POST"]
    assert outcomes(telemetry, "remote_write") == {"sent": 0, "spooled": 0, "dropped": 4}


def test_a_password_in_the_url_is_used_but_never_shown(
    http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    http_peer.answers.append((500, {}, b"boom"))
    http_peer.default = (204, {}, b"")
    url = http_peer.url.replace("http://", "http://falcon:hunter2@") + "/api/v1/write"
    sink = rw_sink(url, tmp_path, telemetry)
    sink.submit(prom_cycle(int(time.time() * 1000), 0.5))
    assert sink.flush(10)
    ok, detail = sink.check()
    sink.close(5)
    basic = "Basic " + base64.b64encode(b"falcon:hunter2").decode()
    assert http_peer.requests[0].headers["Authorization"] == basic
    assert "falcon:<redacted>@127.0.0.1" in caplog.text and "HTTP 500" in caplog.text
    assert ok and "<redacted>" in detail and "hunter2" not in detail
    down = rw_sink("http://falcon:hunter2@127.0.0.1:9/api/v1/write", tmp_path / "down", telemetry)
    down.submit(prom_cycle(int(time.time() * 1000), 0.5))
    wait_until(
        lambda: "cannot connect to http://falcon:<redacted>@127.0.0.1:9" in caplog.text,
        10,
        "the connection failure",
    )
    down.close(0.5)
    assert "hunter2" not in caplog.text


def test_an_answer_cut_off_mid_body_is_retried_not_dropped(tmp_path: Path, telemetry: Telemetry) -> None:
    """The server dies while answering (body shorter than its Content-Length): the batch may
    not have been stored, so it is sent again rather than dropped as refused."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    bodies: list[bytes] = []

    def serve() -> None:
        cut_off = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ncut"
        for answer in (cut_off, b"HTTP/1.1 204 No Content\r\n\r\n"):
            conn, _ = server.accept()
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(
                    next(
                        line.split(b":")[1]
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    )
                )
                while len(body) < length:
                    body += conn.recv(65536)
                bodies.append(body)
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    sink = rw_sink(f"http://127.0.0.1:{port}/api/v1/write", tmp_path, telemetry)
    sink.submit(prom_cycle(int(time.time() * 1000), 0.5))
    try:
        assert sink.flush(10)
    finally:
        sink.close(2)
        server.close()
    assert len(bodies) == 2 and bodies[0] == bodies[1]
    assert outcomes(telemetry, "remote_write") == {"sent": 4, "spooled": 4, "dropped": 0}


def test_a_second_sink_on_the_same_spool_drops_counted_and_leaves_the_first_alone(
    http_peer: HttpPeer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``run --once`` next to the running agent with the same spool_dir."""
    cfg = FalconAgentSinkConfig(type="falcon_agent", url=http_peer.url + "/v1/push", batch_max_age=0.001)
    agent = falcon_agent.build(
        cfg, SinkContext(spool_dir=tmp_path, spool_max_bytes=1 << 20, telemetry=Telemetry())
    )
    agent.submit(falcon_cycle(1_700_000_000, 1.0))
    assert agent.flush(10)
    once_telemetry = Telemetry()
    once = falcon_agent.build(
        cfg, SinkContext(spool_dir=tmp_path, spool_max_bytes=1 << 20, telemetry=once_telemetry)
    )
    once.submit(falcon_cycle(1_700_000_015, 2.0))
    started = time.monotonic()
    once.close(10)
    assert time.monotonic() - started < 5, "a busy spool must not hold up the shutdown"
    assert outcomes(once_telemetry, "falcon_agent") == {"sent": 0, "spooled": 0, "dropped": 3}
    assert len([r for r in caplog.records if "in use by another falcon-gpu process" in r.message]) == 1
    agent.submit(falcon_cycle(1_700_000_030, 3.0))
    assert agent.flush(10)
    agent.close(5)
    stamps = sorted({item["timestamp"] for r in http_peer.requests for item in json.loads(r.body)})
    assert stamps == [1_700_000_000, 1_700_000_030]


def test_a_failing_ledger_write_does_not_stop_the_sender(
    http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry
) -> None:
    """Disk full when the acknowledgement is written: the sender must go on delivering."""
    http_peer.default = (204, {}, b"")
    sink = rw_sink(http_peer.url + "/api/v1/write", tmp_path, telemetry)
    real_ack = sink._spool.ack
    failures = iter([True])

    def ack(entry):  # type: ignore[no-untyped-def]
        if next(failures, False):
            raise OSError(28, "No space left on device")
        real_ack(entry)

    sink._spool.ack = ack  # type: ignore[method-assign]
    now = int(time.time() * 1000)
    sink.submit(prom_cycle(now, 0.1))
    wait_until(lambda: telemetry.view().errors_total.get("spool_write", 0) == 1, 10, "the failed ack")
    sink.submit(prom_cycle(now + 1000, 0.2))
    assert sink.flush(10)
    sink.close(5)
    assert len(http_peer.requests) == 2
    assert outcomes(telemetry, "remote_write") == {"sent": 8, "spooled": 0, "dropped": 0}


def test_each_outage_that_overflows_the_cap_is_logged(
    http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """Logged once per outage, not once per process: a second overflow a week later must show."""
    cfg = FalconAgentSinkConfig(
        type="falcon_agent",
        url=http_peer.url + "/v1/push",
        batch_max_age=0.001,
        retry_initial_delay=0.02,
        retry_max_delay=0.05,
    )
    sink = falcon_agent.build(
        cfg, SinkContext(spool_dir=tmp_path, spool_max_bytes=64 * 1024, telemetry=telemetry)
    )
    for outage in range(2):
        http_peer.default = (503, {}, b"down")
        for i in range(300):  # one batch per cycle (a flush cuts the batch), ~150 KB in all
            sink.submit(falcon_cycle(1_700_000_000 + 15 * i, float(i), n=4))
            sink.flush(0)
        wait_until(lambda n=outage: telemetry.view().errors_total.get("spool_full", 0) > n, 20, "the cap")
        http_peer.default = (200, {}, b"success")
        assert sink.flush(20)
    sink.close(5)
    overflows = [r for r in caplog.records if "spool over" in r.message]
    assert len(overflows) == 2


def test_redact_url_hides_user_password_and_query_values() -> None:
    from falcon_gpu.delivery.secrets import redact_url

    assert redact_url("https://u:pw@h:443/api/v1/push?api_key=abc&tenant=t") == (
        "https://u:<redacted>@h:443/api/v1/push?api_key=<redacted>&tenant=<redacted>"
    )
    assert redact_url("http://127.0.0.1:9091") == "http://127.0.0.1:9091"
    assert redact_url("http://h/p?flag") == "http://h/p?flag"


def test_an_unwritable_spool_sends_from_memory_in_order_and_returns_to_the_spool(
    http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """Disk full: batches must still reach a server that is up (not be dropped), oldest first,
    and go back to the durable spool once it can be written again."""
    import errno

    import cramjam

    from falcon_gpu.sinks.remote_write.proto import remote_v1_pb2

    http_peer.default = (204, {}, b"")
    sink = rw_sink(http_peer.url + "/api/v1/write", tmp_path, telemetry)
    now = int(time.time() * 1000)
    sink.submit(prom_cycle(now, 0.1))
    assert sink.flush(10)

    def disk_full(samples: int, body: bytes) -> object:
        raise OSError(errno.ENOSPC, "No space left on device")

    sink._spool.append = disk_full  # type: ignore[method-assign]
    for i in (1, 2, 3):
        sink.submit(prom_cycle(now + i * 1000, 0.1 * (i + 1)))
    assert sink.flush(10)
    del sink._spool.append  # the disk has room again
    sink.submit(prom_cycle(now + 4000, 0.5))
    assert sink.flush(10)
    assert sink._spool.size_bytes == 0  # delivered through the spool and acknowledged
    sink.close(5)

    stamps = []
    for req in http_peer.requests:
        write = remote_v1_pb2.WriteRequest.FromString(bytes(cramjam.snappy.decompress_raw(req.body)))
        stamps += [sample.timestamp for sample in write.timeseries[0].samples]
    assert stamps == [now + i * 1000 for i in range(5)]  # each cycle once, oldest first
    assert outcomes(telemetry, "remote_write")["dropped"] == 0
    assert telemetry.view().errors_total["spool_write"] >= 1
    assert len([r for r in caplog.records if "in memory (not durable)" in r.getMessage()]) == 1
