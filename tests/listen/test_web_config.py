"""Issue 19.4: ``web_config_file`` (exporter-toolkit's format) on ``listen``: TLS, mTLS, basic auth.

In process: what is refused (no credentials, a wrong password, no or a foreign client
certificate under RequireAndVerifyClientCert, TLS 1.1 under ``min_version: TLS12``), the headers,
and the file read again when it or a certificate changes (a bad edit keeps the one in force).
Through the CLI: a bad file, a missing certificate, a plain-text password exit 2 naming the key.
End to end: the real Prometheus scrapes the real agent over TLS + basic auth, then over mTLS.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from falcon_gpu.listen import LatestCycle, ListenServer, open_listener
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import ConfigError
from tests.delivery.conftest import (
    free_port,
    http_get,
    need,
    prom_cycle,
    prom_query,
    wait_until,
)
from tests.listen.certs import Certs, make_certs
from tests.listen.scraper import start_scraper

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "s3cret-Passw0rd"


def hashed(password: str) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()  # cost 4: fast tests


def write(path: Path, text: str) -> Path:
    """Write so that a reader polling the stat sees a change even within one mtime tick."""
    old = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    if old:
        os.utime(path, ns=(old + 10**9, old + 10**9))
    return path


def tls_block(certs: Certs, *, client_auth: str = "NoClientCert", min_version: str = "TLS12") -> str:
    ca = f"  client_ca_file: {certs.ca}\n" if client_auth != "NoClientCert" else ""
    return (
        f"tls_server_config:\n  cert_file: {certs.server_cert}\n  key_file: {certs.server_key}\n"
        f"  client_auth_type: {client_auth}\n  min_version: {min_version}\n{ca}"
    )


def users_block(**users: str) -> str:
    return "basic_auth_users:\n" + "".join(f"  {u}: '{h}'\n" for u, h in users.items())


def client_context(certs: Certs, *, cert: bool = False, stranger: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    if cert:
        ctx.load_cert_chain(certs.client_cert, certs.client_key)
    if stranger:
        ctx.load_cert_chain(certs.other_client_cert, certs.other_client_key)
    return ctx


def get(
    url: str, ctx: ssl.SSLContext | None, auth: tuple[str, str] | None = None
) -> tuple[int, dict[str, str]]:
    headers = {}
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5, context=ctx) as resp:
            resp.read()
            return resp.status, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "certs")


class Served:
    def __init__(self, config: Path) -> None:
        self.telemetry = Telemetry()
        self.latest = LatestCycle(30)
        self.latest.submit(prom_cycle(10, 1.0))
        self.server: ListenServer = open_listener(
            "127.0.0.1:0", self.latest, web_config_file=config, telemetry=self.telemetry
        )
        self.server.start()
        self.url = f"https://127.0.0.1:{self.server.address[1]}"
        self.port = self.server.address[1]


@pytest.fixture
def serve() -> Iterator[type[Served]]:
    started: list[Served] = []

    class Tracked(Served):
        def __init__(self, config: Path) -> None:
            super().__init__(config)
            started.append(self)

    yield Tracked
    for s in started:
        s.server.close()


def test_tls_with_basic_auth_refuses_without_credentials_and_with_a_wrong_password(
    certs: Certs, tmp_path: Path, serve: type[Served]
) -> None:
    config = write(
        tmp_path / "web.yml",
        tls_block(certs) + users_block(prometheus=hashed(PASSWORD))
        + "http_server_config:\n  headers:\n    X-Frame-Options: deny\n    X-Content-Type-Options: nosniff\n",
    )  # fmt: skip
    s = serve(config)
    ctx = client_context(certs)
    status, headers = get(s.url + "/metrics", ctx)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    assert headers["X-Frame-Options"] == "deny" and headers["X-Content-Type-Options"] == "nosniff"
    assert get(s.url + "/metrics", ctx, ("prometheus", "wrong"))[0] == 401
    assert get(s.url + "/metrics", ctx, ("nobody", PASSWORD))[0] == 401
    status, headers = get(s.url + "/metrics", ctx, ("prometheus", PASSWORD))
    assert status == 200 and headers["X-Frame-Options"] == "deny"
    assert get(s.url + "/healthz", ctx)[0] == 200  # the kubelet's probes carry no credentials
    with pytest.raises(OSError):  # plain HTTP on a TLS port is not answered
        http_get(s.url.replace("https", "http") + "/metrics", timeout=3)


def test_mtls_refuses_no_client_certificate_and_a_foreign_one(
    certs: Certs, tmp_path: Path, serve: type[Served]
) -> None:
    s = serve(write(tmp_path / "web.yml", tls_block(certs, client_auth="RequireAndVerifyClientCert")))
    assert get(s.url + "/metrics", client_context(certs, cert=True))[0] == 200
    for ctx in (client_context(certs), client_context(certs, stranger=True)):
        with pytest.raises(OSError):  # the handshake (TLS 1.3: the first read) fails
            get(s.url + "/metrics", ctx)


def _handshake_version(port: int, version: ssl.TLSVersion) -> str:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    ctx.minimum_version = ctx.maximum_version = version
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, ctx.wrap_socket(raw) as tls:
        return str(tls.version())


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
def test_tls11_is_refused_under_min_version_tls12(certs: Certs, tmp_path: Path, serve: type[Served]) -> None:
    lenient = serve(write(tmp_path / "lenient.yml", tls_block(certs, min_version="TLS11")))
    try:
        assert _handshake_version(lenient.port, ssl.TLSVersion.TLSv1_1) == "TLSv1.1"
    except ssl.SSLError as exc:
        pytest.skip(f"this OpenSSL cannot speak TLS 1.1 even when both sides allow it: {exc}")
    strict = serve(write(tmp_path / "strict.yml", tls_block(certs, min_version="TLS12")))
    with pytest.raises(ssl.SSLError):
        _handshake_version(strict.port, ssl.TLSVersion.TLSv1_1)
    assert _handshake_version(strict.port, ssl.TLSVersion.TLSv1_2) == "TLSv1.2"


def test_the_file_and_its_certificates_are_read_again_when_they_change(
    certs: Certs, tmp_path: Path, serve: type[Served]
) -> None:
    config = write(tmp_path / "web.yml", tls_block(certs) + users_block(prometheus=hashed("first")))
    s = serve(config)
    ctx = client_context(certs)
    assert get(s.url + "/metrics", ctx, ("prometheus", "first"))[0] == 200
    write(config, tls_block(certs) + users_block(prometheus=hashed("second")))
    wait_until(
        lambda: get(s.url + "/metrics", ctx, ("prometheus", "second"))[0] == 200, 5, "the new password"
    )
    assert get(s.url + "/metrics", ctx, ("prometheus", "first"))[0] == 401
    # a bad edit (a plain-text password) keeps the configuration in force, counted
    write(config, tls_block(certs) + "basic_auth_users:\n  prometheus: third\n")

    def counted() -> bool:
        get(s.url + "/metrics", ctx, ("prometheus", "second"))  # read again on the next request
        return s.telemetry.view().errors_total.get("web_config", 0) >= 1

    wait_until(counted, 5, "the error counted")
    assert get(s.url + "/metrics", ctx, ("prometheus", "second"))[0] == 200
    assert not s.server.reload_web_config()
    # a renewed certificate from another CA is served to the next connection
    renewed = make_certs(tmp_path / "renewed")
    for new, old in ((renewed.server_cert, certs.server_cert), (renewed.server_key, certs.server_key)):
        write(old, new.read_text())
    write(config, tls_block(certs))  # and no basic auth any more
    wait_until(lambda: _serves(s.url, client_context(renewed)), 5, "the renewed certificate")
    with pytest.raises(OSError):
        get(s.url + "/metrics", ctx)  # the old CA no longer verifies it


def _serves(url: str, ctx: ssl.SSLContext) -> bool:
    try:
        return get(url + "/metrics", ctx)[0] == 200
    except OSError:
        return False


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("tls_server_config: [", r"not valid YAML"),
        ("tls_server_config:\n  cert_fil: x.pem\n", r"tls_server_config\.cert_fil: unknown key"),
        ("tls_server_config:\n  cert_file: missing.pem\n  key_file: missing.key\n",
         r"tls_server_config\.cert_file: cannot read .*missing\.pem"),
        ("basic_auth_users:\n  alice: hunter2\n", r"basic_auth_users\.alice: is not a bcrypt hash"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Maybe\n",
         r"tls_server_config\.client_auth_type: Input should be"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS14\n",
         r"tls_server_config\.min_version"),
        ("http_server_config:\n  headers:\n    X-Powered-By: me\n", r"headers\.X-Powered-By: this header"),
        ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", r"X-Frame-Options: must be one of"),
        ("rate_limit:\n  interval: 1s\n", r"rate_limit: not supported"),
    ],
)  # fmt: skip
def test_a_bad_file_names_the_key(content: str, message: str, tmp_path: Path) -> None:
    config = write(tmp_path / "web.yml", content)
    with pytest.raises(ConfigError, match="setting 'web_config_file': .*" + message) as err:
        open_listener("127.0.0.1:0", LatestCycle(30), web_config_file=config)
    assert "hunter2" not in str(err.value)  # a password never reaches a message


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("basic_auth_users:\n  alice: hunter2\n", "basic_auth_users.alice: is not a bcrypt hash"),
        ("tls_server_config:\n  cert_file: gone.pem\n  key_file: gone.key\n", "tls_server_config.cert_file"),
        ("tls_server_config: {cert_file: [}\n", "not valid YAML"),
    ],
)
def test_run_exits_2_naming_the_key(content: str, message: str, tmp_path: Path) -> None:
    config = write(tmp_path / "web.yml", content)
    done = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "--once", "--web.config.file", str(config)],
        env={"FALCON_GPU_LISTEN": "127.0.0.1:0", "FALCON_GPU_SPOOL_DIR": str(tmp_path),
             "PATH": "/usr/bin:/bin"},
        capture_output=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert message.encode() in done.stderr and b"setting 'web_config_file'" in done.stderr
    assert b"Traceback" not in done.stderr and b"hunter2" not in done.stderr


def test_web_config_without_listen_is_a_configuration_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "--once", "--web.config.file", "x.yml"],
        env={"FALCON_GPU_SPOOL_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and b"'web_config_file'" in done.stderr and b"'listen'" in done.stderr


@pytest.mark.servers
def test_prometheus_scrapes_over_tls_with_basic_auth_then_over_mtls(certs: Certs, tmp_path: Path) -> None:
    need("prometheus")
    agent_port = free_port()
    config = write(tmp_path / "web.yml", tls_block(certs) + users_block(prometheus=hashed(PASSWORD)))
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD)
    argv = [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "--interval", "1",
            "--web.config.file", str(config)]  # fmt: skip
    env = {"FALCON_GPU_LISTEN": f"127.0.0.1:{agent_port}", "FALCON_GPU_NODE": "tls-node",
           "FALCON_GPU_SPOOL_DIR": str(tmp_path / "spool"), "FALCON_GPU_SINKS": "[]",
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    with (tmp_path / "agent.log").open("wb") as log:
        agent = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    target = f"static_configs: [{{targets: ['127.0.0.1:{agent_port}']}}]"
    prometheus = start_scraper(
        tmp_path,
        f"  - job_name: basic\n    scheme: https\n    {target}\n    tls_config: {{ca_file: {certs.ca}}}\n"
        f"    basic_auth: {{username: prometheus, password_file: {password_file}}}\n"
        f"  - job_name: mtls\n    scheme: https\n    {target}\n"
        f"    tls_config: {{ca_file: {certs.ca}, cert_file: {certs.client_cert},"
        f" key_file: {certs.client_key}}}\n",
    )

    def up() -> dict[str, float]:
        return {r["metric"]["job"]: float(r["value"][1]) for r in prom_query(prometheus, "up")}

    try:
        # TLS + basic auth: the job with the password is up; the one without it gets 401
        wait_until(lambda: up() == {"basic": 1.0, "mtls": 0.0}, 30, "basic up, mtls refused")
        info = prom_query(prometheus, 'falcon_gpu_info{job="basic"}')
        assert info and {r["metric"]["node"] for r in info} == {"tls-node"}
        # now mTLS without passwords: the job with the client certificate is up, the other refused
        write(config, tls_block(certs, client_auth="RequireAndVerifyClientCert"))
        wait_until(lambda: up() == {"basic": 0.0, "mtls": 1.0}, 30, "mtls up, basic refused")
        assert prom_query(prometheus, 'falcon_gpu_info{job="mtls", node="tls-node"}')
        targets = json.loads(http_get(prometheus.url + "/api/v1/targets"))["data"]["activeTargets"]
        basic = next(t for t in targets if t["labels"]["job"] == "basic")
        # what Go's client saw: TLS 1.3 refuses the missing certificate after the handshake, so the
        # error is the alert, or (the alert racing the client's first write) the reset that follows it
        refused = ("remote error: tls: certificate required", "connection reset by peer")
        assert basic["health"] == "down" and any(r in basic["lastError"] for r in refused), basic
    finally:
        prometheus.stop()
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(30) == 0
