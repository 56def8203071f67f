"""Issue 8, "Data loss and leaks": each fault as a fault injector finds it, and what it does now.

A read-only spool (a real read-only bind mount), TLS files that are missing at
start or vanish later, a server that echoes the Authorization header in a 401,
a BOM in a token file, headers requests would refuse, durations out of range,
a server that trickles its answer, and a transfer peer that closes idle
connections.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from falcon_gpu.delivery.http import HttpTransport
from falcon_gpu.delivery.outcome import RetryableError
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import ConfigError, load_settings
from falcon_gpu.sinks import falcon_agent, falcon_transfer
from falcon_gpu.sinks.base import Sink
from falcon_gpu.sinks.config import FalconAgentSinkConfig, FalconTransferSinkConfig
from falcon_gpu.sinks.context import SinkContext
from falcon_gpu.sinks.falcon_transfer import _RpcConnection
from tests.delivery.conftest import (
    HttpPeer,
    ManagedServer,
    Request,
    TransferServer,
    falcon_cycle,
    outcomes,
    prom_query,
    wait_until,
)
from tests.delivery.test_http_outcomes import https_peer, make_ca_and_server_cert

ROOT = Path(__file__).resolve().parents[2]
FAST = {"batch_max_age": 0.001, "retry_initial_delay": 0.02, "retry_max_delay": 0.2}


def agent_sink(url: str, spool: Path, telemetry: Telemetry, **extra: object) -> Sink:
    cfg = FalconAgentSinkConfig(type="falcon_agent", url=url, **{**FAST, **extra})  # type: ignore[arg-type]
    return falcon_agent.build(cfg, SinkContext(spool_dir=spool, spool_max_bytes=1 << 20, telemetry=telemetry))


def received(peer: HttpPeer) -> list[tuple[int, float]]:
    """(timestamp, value) of every item the peer received, in arrival order."""
    return [(i["timestamp"], i["value"]) for r in peer.requests for i in json.loads(r.body)]


def warnings(caplog: pytest.LogCaptureFixture, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if needle in r.getMessage()]


# -- 1. a read-only spool_dir ------------------------------------------------------------
def seal(directory: Path) -> None:
    """Make ``directory`` a read-only bind mount of itself: what a disk remounted read-only
    after an error looks like (as root, as in CI; a chmod would not stop root)."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root (the tests run as root in CI)")
    try:
        subprocess.run(["mount", "--bind", str(directory), str(directory)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot make a bind mount here: {exc}")
    subprocess.run(
        ["mount", "-o", "remount,ro,bind", str(directory), str(directory)], check=True, capture_output=True
    )
    with pytest.raises(OSError, match="Read-only file system"):
        (directory / "probe").write_text("x")


@pytest.fixture
def ro_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory the test fills, then :func:`seal` s; unmounted afterwards."""
    directory = tmp_path / "ro"
    directory.mkdir()
    yield directory
    # a bind mount of a directory onto itself is on the same device: os.path.ismount misses it
    while str(directory) in (line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()):
        subprocess.run(["umount", str(directory)], check=True, capture_output=True)


def test_read_only_spool_sends_from_memory_and_logs_each_failure_once(
    http_peer: HttpPeer, ro_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (ro_dir / "falcon_agent").mkdir()  # the agent ran here before the disk went read-only
    seal(ro_dir)
    telemetry = Telemetry()
    sink = agent_sink(http_peer.url + "/v1/push", ro_dir, telemetry)
    for k in range(3):
        sink.submit(falcon_cycle(1_700_000_000 + 15 * k, float(k)))
        assert sink.flush(10), "a read-only spool must not stop delivery"
    sink.submit(falcon_cycle(1_700_000_045, 3.0))
    sink.close(10)  # SIGTERM right after a cycle: what is in memory is sent, not lost
    assert received(http_peer) == [(1_700_000_000 + 15 * k, float(k) + i) for k in range(4) for i in range(3)]
    assert outcomes(telemetry, "falcon_agent") == {"sent": 12, "spooled": 0, "dropped": 0}
    assert len(warnings(caplog, "cannot read the spool")) == 1
    assert len(warnings(caplog, "cannot write the spool")) == 1
    assert "Read-only file system" in caplog.text
    assert not warnings(caplog, "are lost")


def test_read_only_spool_still_sends_its_backlog_first(
    http_peer: HttpPeer, ro_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The backlog of an outage is on the disk when it goes read-only: it is sent, in order,
    before what came later (held in memory)."""
    down = agent_sink("http://127.0.0.1:9/v1/push", ro_dir, Telemetry())
    down.submit(falcon_cycle(1_700_000_000, 0.0))
    down.submit(falcon_cycle(1_700_000_015, 1.0))
    down.close(1)  # the server was down: both cycles wait in the spool
    seal(ro_dir)
    telemetry = Telemetry()
    sink = agent_sink(http_peer.url + "/v1/push", ro_dir, telemetry)
    sink.submit(falcon_cycle(1_700_000_030, 2.0))
    assert sink.flush(10)
    sink.close(10)
    assert [t for t, _ in received(http_peer)] == [1_700_000_000] * 3 + [1_700_000_015] * 3 + [
        1_700_000_030
    ] * 3
    counted = outcomes(telemetry, "falcon_agent")
    # "spooled" counts batches whose first attempt failed: the test's peer once closed a connection
    # without an answer under a full suite (RemoteDisconnected), and the retry delivered it. Without
    # such a hiccup it is 0; with one, only the replayed backlog (6 samples) may carry it.
    assert counted["sent"] == 9 and counted["dropped"] == 0, counted
    hiccup = bool(warnings(caplog, "Remote end closed connection"))
    assert counted["spooled"] in ((0, 6) if hiccup else (0,)), counted
    assert len(warnings(caplog, "cannot write the spool")) == 1
    assert len(warnings(caplog, "cannot record a delivery")) == 1  # resent after a restart


@pytest.mark.servers
def test_agent_on_a_read_only_spool_delivers_to_prometheus_and_loses_nothing_at_sigterm(
    prometheus: ManagedServer, ro_dir: Path, tmp_path: Path
) -> None:
    (ro_dir / "remote_write").mkdir()
    seal(ro_dir)
    config = tmp_path / "falcon-gpu.toml"
    config.write_text(
        f'node = "ro-node"\ninterval = 1\nspool_dir = "{ro_dir}"\n'
        f'[[sinks]]\ntype = "remote_write"\nurl = "{prometheus.url}/api/v1/write"\nretry_max_delay = 0.5\n'
    )
    log = tmp_path / "agent.log"
    argv = [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "--config", str(config)]
    with log.open("wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        wait_until(lambda: bool(prom_query(prometheus, "falcon_gpu_agent_cycles_total")), 30, "a sample")
    finally:
        proc.terminate()
        code = proc.wait(60)
    text = log.read_text()
    assert code == 0, text
    assert text.count("cannot read the spool") == 1 and text.count("cannot write the spool") == 1, text
    assert "are lost" not in text, text


# -- 2. TLS files -------------------------------------------------------------------------
def write_toml(tmp_path: Path, sink_lines: str) -> Path:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[[sinks]]\ntype = "remote_write"\nurl = "https://127.0.0.1:1/api/v1/write"\n{sink_lines}\n'
    )
    return cfg


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return make_ca_and_server_cert(tmp_path_factory.mktemp("pki"))


@pytest.mark.parametrize(
    ("lines", "needle"),
    [
        ('ca_file = "{d}/missing.pem"', "ca_file '{d}/missing.pem' cannot be loaded"),
        ('ca_file = "{d}/not-pem.txt"', "ca_file '{d}/not-pem.txt' cannot be loaded"),
        ('cert_file = "{d}/missing.pem"\nkey_file = "{key}"', "cert_file '{d}/missing.pem' does not exist"),
        ('cert_file = "{cert}"\nkey_file = "{d}/missing.key"', "key_file '{d}/missing.key' does not exist"),
        (
            'cert_file = "{cert}"\nkey_file = "{d}/other.key"',
            "cannot be loaded as a PEM certificate and its key",
        ),
    ],
)
def test_a_bad_tls_file_is_refused_at_start_naming_the_setting(
    tmp_path: Path, pki: tuple[Path, Path, Path], lines: str, needle: str
) -> None:
    _, cert, key = pki
    (tmp_path / "not-pem.txt").write_text("hello\n")
    other = tmp_path / "other.key"
    subprocess.run(["openssl", "genrsa", "-out", str(other), "2048"], check=True, capture_output=True)
    fill = {"d": tmp_path, "cert": cert, "key": key}
    with pytest.raises(ConfigError) as err:
        load_settings(write_toml(tmp_path, lines.format(**fill)))
    assert needle.format(**fill) in str(err.value)


def test_good_tls_files_load(tmp_path: Path, pki: tuple[Path, Path, Path]) -> None:
    ca, cert, key = pki
    lines = f'ca_file = "{ca}"\ncert_file = "{cert}"\nkey_file = "{key}"'
    sink = load_settings(write_toml(tmp_path, lines)).sinks[0]
    assert (sink.ca_file, sink.cert_file, sink.key_file) == (ca, cert, key)  # type: ignore[union-attr]
    # requests also takes a directory of hashed CA certificates (c_rehash)
    assert load_settings(write_toml(tmp_path, f'ca_file = "{ca.parent}"')).sinks[0].ca_file == ca.parent  # type: ignore[union-attr]


def test_cli_exits_2_for_a_missing_ca_file(tmp_path: Path) -> None:
    cfg = write_toml(tmp_path, f'ca_file = "{tmp_path}/missing.pem"')
    proc = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "run", "--once", "--simulate", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    assert "ca_file" in proc.stderr and "Traceback" not in proc.stderr


def test_a_ca_file_that_disappears_later_is_retried_and_the_data_kept(
    tmp_path: Path, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    peer, ca = https_peer(tmp_path)
    peer.default = (200, {}, b"success")
    try:
        sink = agent_sink(peer.url + "/v1/push", tmp_path / "spool", telemetry, ca_file=ca)
        moved = tmp_path / "ca.moved"
        ca.rename(moved)  # a rotated secret mount, between two writes
        sink.submit(falcon_cycle(1_700_000_000, 1.0))
        wait_until(lambda: telemetry.view().errors_total.get("sink", 0) >= 2, 10, "retries")
        moved.rename(ca)
        assert sink.flush(10)
        sink.close(5)
    finally:
        peer.close()
    assert received(peer) == [(1_700_000_000, 1.0 + i) for i in range(3)]
    assert outcomes(telemetry, "falcon_agent") == {"sent": 3, "spooled": 3, "dropped": 0}
    assert len(warnings(caplog, "TLS CA certificate bundle")) == 1
    assert not warnings(caplog, "unexpectedly")


# -- 3. secrets never logged --------------------------------------------------------------
def echo(status: int) -> Callable[[Request], tuple[int, dict[str, str], bytes]]:
    """A server that tells the client what it sent, in every form."""

    def answer(request: Request) -> tuple[int, dict[str, str], bytes]:
        sent = request.headers.get("Authorization", "")
        decoded = ""
        if sent.startswith("Basic "):
            decoded = base64.b64decode(sent[6:]).decode()
        return status, {}, f"denied: you sent Authorization: {sent} ({decoded})".encode()

    return answer


@pytest.mark.parametrize(
    ("auth", "status", "logged"),
    [
        ("bearer", 401, "answered HTTP 401"),
        ("basic", 401, "answered HTTP 401"),
        ("bearer", 200, "unexpected answer"),  # falcon-agent answers "success"; anything else is logged
    ],
)
def test_a_server_echoing_the_authorization_header_never_gets_it_logged(
    http_peer: HttpPeer,
    tmp_path: Path,
    telemetry: Telemetry,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    auth: str,
    status: int,
    logged: str,
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("tok-4f9a1c77e2\n")
    extra: dict[str, object] = (
        {"bearer_token_file": secret}
        if auth == "bearer"
        else {"basic_auth_user": "falcon", "basic_auth_password_file": secret}
    )
    http_peer.respond = echo(status)
    caplog.set_level(logging.DEBUG)
    sink = agent_sink(http_peer.url + "/v1/push", tmp_path / "spool", telemetry, **extra)
    sink.submit(falcon_cycle(1_700_000_000, 1.0))
    assert sink.flush(10)
    sink.close(5)
    sent = http_peer.requests[0].headers["Authorization"]
    assert "tok-4f9a1c77e2" in sent or "tok-4f9a1c77e2" in base64.b64decode(sent[6:]).decode()
    refused = warnings(caplog, logged)
    assert len(refused) == 1 and "<redacted>" in refused[0]
    assert outcomes(telemetry, "falcon_agent") == {"sent": 0, "spooled": 0, "dropped": 3}
    shown = caplog.text + "".join(capfd.readouterr())
    for leak in ("tok-4f9a1c77e2", sent, sent.split(" ", 1)[1]):
        assert leak not in shown


def test_a_token_file_with_a_bom_is_sent_without_it(
    http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    token = tmp_path / "token"
    token.write_bytes("\ufefftok-bom-5d21\r\n".encode())  # Notepad's "UTF-8"
    sink = agent_sink(http_peer.url + "/v1/push", tmp_path / "spool", telemetry, bearer_token_file=token)
    sink.submit(falcon_cycle(1_700_000_000, 1.0))
    assert sink.flush(10)
    sink.close(5)
    assert [r.headers["Authorization"] for r in http_peer.requests] == ["Bearer tok-bom-5d21"]
    assert outcomes(telemetry, "falcon_agent") == {"sent": 3, "spooled": 0, "dropped": 0}
    assert "tok-bom" not in caplog.text


def test_a_token_that_cannot_be_a_header_is_a_secret_file_error_retried(
    http_peer: HttpPeer, tmp_path: Path, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    token = tmp_path / "token"
    token.write_text("tok-\u00e9t\u00e9-9b7 pasted\n")  # non-ASCII and a space
    sink = agent_sink(http_peer.url + "/v1/push", tmp_path / "spool", telemetry, bearer_token_file=token)
    sink.submit(falcon_cycle(1_700_000_000, 1.0))
    wait_until(lambda: telemetry.view().errors_total.get("sink", 0) >= 2, 10, "retries")
    assert http_peer.requests == [], "nothing was sent with a broken token"
    fixed = tmp_path / "token.new"
    fixed.write_text("tok-9b7\n")
    fixed.replace(token)  # the next rotation fixes it
    assert sink.flush(10)
    sink.close(5)
    assert [r.headers["Authorization"] for r in http_peer.requests] == ["Bearer tok-9b7"]
    assert outcomes(telemetry, "falcon_agent") == {"sent": 3, "spooled": 3, "dropped": 0}
    lines = warnings(caplog, "cannot be sent in an HTTP header")
    assert len(lines) == 1 and str(token) in lines[0]
    assert "pasted" not in caplog.text and "\u00e9t\u00e9" not in caplog.text


# -- 4. headers requests would refuse -------------------------------------------------------
@pytest.mark.parametrize(
    "table",
    [
        '{ "X-Scope-OrgID" = "gpu\\nteam" }',
        '{ "X-Scope-OrgID" = " gpu-team" }',
        '{ "X-Scope-OrgID" = "gpu-t\u00e9am" }',
        '{ "X Scope" = "gpu-team" }',
        '{ "X-Scope:OrgID" = "gpu-team" }',
    ],
)
def test_an_unsendable_header_exits_2_naming_headers(tmp_path: Path, table: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(write_toml(tmp_path, f"headers = {table}"))
    assert "'sinks.0.remote_write.headers'" in str(err.value)


def test_valid_headers_still_load(tmp_path: Path) -> None:
    settings = load_settings(write_toml(tmp_path, 'headers = { "X-Scope-OrgID" = "gpu team/a_b" }'))
    assert settings.sinks[0].headers == {"X-Scope-OrgID": "gpu team/a_b"}  # type: ignore[union-attr]


# -- 5. durations -----------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["timeout", "batch_max_age", "retry_initial_delay", "retry_max_delay"])
@pytest.mark.parametrize("value", ["0", "-1", "86400.5", "1e10"])
def test_a_sink_duration_out_of_range_exits_2_naming_it(tmp_path: Path, key: str, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(write_toml(tmp_path, f"{key} = {value}"))
    assert f"'sinks.0.remote_write.{key}'" in str(err.value)


@pytest.mark.parametrize("value", ["0", "1e10"])
def test_interval_out_of_range_exits_2(tmp_path: Path, value: str) -> None:
    (tmp_path / "c.toml").write_text(f"interval = {value}\n")
    with pytest.raises(ConfigError, match="'interval'"):
        load_settings(tmp_path / "c.toml")


def test_a_day_is_the_longest_duration(tmp_path: Path) -> None:
    keys = ("timeout", "batch_max_age", "retry_initial_delay", "retry_max_delay")
    settings = load_settings(write_toml(tmp_path, "\n".join(f"{k} = 86400" for k in keys)))
    assert [getattr(settings.sinks[0], k) for k in keys] == [86400.0] * 4


# -- 6. timeout bounds the whole request ------------------------------------------------------
class TricklingServer:
    """Answers the first connection one line a second (the headers, or the body after fast
    headers); every later connection gets a normal 200 at once."""

    def __init__(self, where: str, tls: ssl.SSLContext | None = None) -> None:
        self._where, self._tls = where, tls
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                raw, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(raw, self.connections - 1), daemon=True).start()

    def _answer(self, raw: socket.socket, n: int) -> None:
        try:
            conn = self._tls.wrap_socket(raw, server_side=True) if self._tls else raw
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                if n > 0:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsuccess")
                    time.sleep(0.5)
                    return
                if self._where == "headers":
                    conn.sendall(b"HTTP/1.1 200 OK\r\n")
                    for i in range(8):
                        if self._stop.wait(1.0):
                            return
                        conn.sendall(b"X-Slow-%d: %d\r\n" % (i, i))
                    conn.sendall(b"Content-Length: 7\r\n\r\nsuccess")
                else:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n")
                    for _ in range(8):
                        if self._stop.wait(1.0):
                            return
                        conn.sendall(b"s")
        except OSError:
            return

    def close(self) -> None:
        self._stop.set()
        self._listener.close()


@pytest.mark.parametrize(("where", "tls"), [("headers", False), ("body", False), ("headers", True)])
def test_timeout_bounds_the_whole_request_against_a_trickling_server(
    tmp_path: Path, where: str, tls: bool
) -> None:
    context, extra = None, {}
    if tls:
        ca, cert, key = make_ca_and_server_cert(tmp_path)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        extra = {"ca_file": ca}
    server = TricklingServer(where, context)
    url = f"{'https' if tls else 'http'}://127.0.0.1:{server.port}/v1/push"
    cfg = FalconAgentSinkConfig(type="falcon_agent", url=url, timeout=1.5, **extra)  # type: ignore[arg-type]
    transport = HttpTransport(cfg, sink="t")
    try:
        started = time.monotonic()
        with pytest.raises(RetryableError, match=r"did not answer within 1\.5 s"):
            transport.request("POST", url, b"[]")
        elapsed = time.monotonic() - started
        assert 1.4 < elapsed < 2.3, f"timeout = 1.5 held the request for {elapsed:.2f} s"
        again = transport.request("POST", url, b"[]")  # the cut connection was dropped, not reused
        assert again.status_code == 200 and again.text == "success"
        assert server.connections == 2
    finally:
        transport.close()
        server.close()


# -- 7. transfer: an idle connection closed by the peer ----------------------------------------
def transfer_sink(address: str, spool: Path, telemetry: Telemetry) -> Sink:
    cfg = FalconTransferSinkConfig(type="falcon_transfer", address=address, **FAST)  # type: ignore[arg-type]
    return falcon_transfer.build(
        cfg, SinkContext(spool_dir=spool, spool_max_bytes=1 << 20, telemetry=telemetry)
    )


def test_transfer_reopens_an_idle_connection_the_peer_closed_silently(
    transfer_binary: Path, tmp_path: Path, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    server = TransferServer(transfer_binary, tmp_path / "got.jsonl", idle_close=0.3)
    server.start()
    caplog.set_level(logging.INFO)
    try:
        sink = transfer_sink(server.address, tmp_path / "spool", telemetry)
        for k in range(3):
            sink.submit(falcon_cycle(1_700_000_000 + 15 * k, float(k)))
            assert sink.flush(10)
            time.sleep(0.6)  # longer than the peer keeps an idle connection
        sink.close(5)
    finally:
        server.stop()
    got = [(i["timestamp"], i["value"]) for i in server.items()]
    assert got == [(1_700_000_000 + 15 * k, float(k) + i) for k in range(3) for i in range(3)]
    assert outcomes(telemetry, "falcon_transfer") == {"sent": 9, "spooled": 0, "dropped": 0}
    assert telemetry.view().errors_total.get("sink", 0) == 0
    assert [r.getMessage() for r in caplog.records if r.name.startswith("falcon_gpu")] == []


def test_transfer_resends_once_when_the_peer_closes_as_the_call_goes_out(tmp_path: Path) -> None:
    """The close races the call (select saw nothing yet): the call goes again once on a new
    connection. A peer that closes every connection at once is still an error."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted: list[socket.socket] = []
    behaviour = {"close_first_reply": True, "close_all": False}

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(conn)
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    def answer(conn: socket.socket) -> None:
        with conn:
            buf = b""
            while True:
                if behaviour["close_all"]:
                    return
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
                while b"\n" in buf:
                    line, _, buf = buf.partition(b"\n")
                    if behaviour["close_first_reply"] and len(accepted) == 1 and b'"id":2' in line:
                        return  # read the second call, then drop the connection unanswered
                    request = json.loads(line)
                    conn.sendall(
                        json.dumps({"id": request["id"], "result": {}, "error": None}).encode() + b"\n"
                    )

    threading.Thread(target=serve, daemon=True).start()
    rpc = _RpcConnection(f"127.0.0.1:{port}", 2.0)
    try:
        assert rpc.call("Transfer.Update", b"[]")["id"] == 1
        assert rpc.call("Transfer.Update", b"[]")["id"] == 2  # resent on a second connection
        assert len(accepted) == 2
        rpc.close()
        behaviour["close_all"] = True
        with pytest.raises(RetryableError, match=r"closed by transfer|reset by peer"):
            rpc.call("Transfer.Update", b"[]")
    finally:
        rpc.close()
        listener.close()


def test_transfer_timeout_bounds_the_whole_call_against_a_trickling_reply() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            for byte in b'{"id":1,"result":{},"error":null}\n':
                if stop.wait(0.3):
                    return
                conn.sendall(bytes([byte]))

    threading.Thread(target=serve, daemon=True).start()
    rpc = _RpcConnection(f"127.0.0.1:{listener.getsockname()[1]}", 1.0)
    started = time.monotonic()
    try:
        with pytest.raises(RetryableError, match=r"did not answer within 1\.0 s"):
            rpc.call("Transfer.Update", b"[]")
    finally:
        stop.set()
        rpc.close()
        listener.close()
    assert time.monotonic() - started < 1.5
