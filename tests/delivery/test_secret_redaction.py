"""No configured secret reaches what the agent logs or prints (issue 19, item 7).

A real loopback server answers every request with an error whose body echoes the request line
(its query) and every header it got, as some receivers do. The agent runs in its own process
at DEBUG (urllib3 then prints each request line) with every kind of secret configured: a
custom header value, a ``?api_key=`` query value, URL user info, a bearer token file and a
basic-auth password file. Neither its stderr/stdout nor ``doctor``'s output may hold one of
them, in any form a server or a library could show (decoded, base64), while the redaction
marker shows where they were.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from falcon_gpu.delivery.secrets import REDACTED, header_secrets

ROOT = Path(__file__).resolve().parents[2]
HEADER_SECRET = "hdr-Secret-7f3a9c"
QUERY_SECRET = "qry-Secret-51d2e8"
USERINFO_SECRET = "url-Secret-a07b44"
TOKEN_SECRET = "tok-Secret-c9e1f0"
PASSWORD_SECRET = "pw-Secret-3b6d2a"
SECRETS = (
    HEADER_SECRET,
    QUERY_SECRET,
    USERINFO_SECRET,
    TOKEN_SECRET,
    PASSWORD_SECRET,
    base64.b64encode(f"bob:{USERINFO_SECRET}".encode()).decode(),
    base64.b64encode(f"alice:{PASSWORD_SECRET}".encode()).decode(),
)


class _Echo(BaseHTTPRequestHandler):
    """400 to a write, 500 to a read: the body echoes the key headers, the request line, every header."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        h = self.headers
        body = (  # what it complains about first, as a server checking a key would; then everything
            f"refused X-Api-Key: {h['X-Api-Key']} Authorization: {h['Authorization']} "
            f"for {self.command} {self.path}\n{h}"
        ).encode()
        self.send_response(500 if self.command == "GET" else 400)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PUT = do_GET = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def echo_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _settings(tmp_path: Path, address: str) -> dict[str, str]:
    """The environment of a run: every setting as a ``FALCON_GPU_*`` variable (sinks as JSON)."""
    token = tmp_path / "token"
    token.write_text(TOKEN_SECRET + "\n")
    password = tmp_path / "password"
    password.write_text(PASSWORD_SECRET)
    sinks = [
        {"type": "remote_write", "url": f"http://{address}/api/v1/write?api_key={QUERY_SECRET}",
         "headers": {"X-Api-Key": HEADER_SECRET}, "bearer_token_file": str(token), "retry_max_delay": 0.1},
        {"type": "falcon_agent", "url": f"http://bob:{USERINFO_SECRET}@{address}/v1/push",
         "retry_max_delay": 0.1},
        {"type": "pushgateway", "url": f"http://{address}", "basic_auth_user": "alice",
         "basic_auth_password_file": str(password), "retry_max_delay": 0.1},
    ]  # fmt: skip
    return {
        "FALCON_GPU_SPOOL_DIR": str(tmp_path / "spool"),
        "FALCON_GPU_LOG_LEVEL": "debug",
        "FALCON_GPU_SINKS": json.dumps(sinks),
    }


def _falcon_gpu(settings: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FALCON_GPU_")} | settings
    return subprocess.run(
        [sys.executable, "-m", "falcon_gpu", *args],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
    )  # fmt: skip


def _assert_no_secret(text: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert leaked == [], text


def test_run_at_debug_logs_no_secret(tmp_path: Path, echo_server: str) -> None:
    proc = _falcon_gpu(_settings(tmp_path, echo_server), "run", "--once", "--simulate", "default")
    out = proc.stdout + proc.stderr
    _assert_no_secret(out)
    assert "answered HTTP 400" in out  # the echoed answers were logged ...
    assert "X-Api-Key: " + REDACTED in out  # ... with each secret replaced by the marker
    assert f"api_key={REDACTED}" in out
    assert "urllib3.connectionpool" in out  # urllib3's own DEBUG lines went through it too


def test_doctor_prints_no_secret(tmp_path: Path, echo_server: str) -> None:
    proc = _falcon_gpu(_settings(tmp_path, echo_server), "doctor", "--simulate", "default")
    out = proc.stdout + proc.stderr
    _assert_no_secret(out)
    assert "answered HTTP 500" in out or "answered HTTP 400" in out
    assert REDACTED in proc.stdout


def test_the_redactor_covers_arguments_tracebacks_and_a_rotated_secret_file(tmp_path: Path) -> None:
    """On a handler, for any logger: the message's arguments, a traceback, and the secret file's
    new content after a rotation; gone from the handler when uninstalled (the runtime owns it)."""
    import io
    import logging

    from falcon_gpu.delivery.redactor import LogRedactor

    token = tmp_path / "token"
    token.write_text(TOKEN_SECRET)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    redactor = LogRedactor([HEADER_SECRET, *header_secrets({"X-Tenant": "ab"})], [token])
    try:
        redactor.install()
        other = logging.getLogger("some.library")
        other.warning("sent %s with %r", HEADER_SECRET, {"token": TOKEN_SECRET})
        try:
            raise ValueError(f"bad key {HEADER_SECRET}")
        except ValueError:
            other.exception("failed")
        token.write_text("tok-Rotated-99aa11")
        os.utime(token, ns=(1, 1))  # a rotation changes the file's identity
        other.warning("now %s", "tok-Rotated-99aa11")
        other.warning("short values stay: ab")
        redactor.uninstall()
        assert redactor not in handler.filters
        other.warning("after %s", HEADER_SECRET)
    finally:
        root.removeHandler(handler)
    lines = stream.getvalue()
    before, after = lines.split("after ")
    _assert_no_secret(before)
    assert "tok-Rotated-99aa11" not in before
    assert before.count(REDACTED) == 4 and "ValueError: bad key <redacted>" in before
    assert "short values stay: ab" in before
    assert after.strip() == HEADER_SECRET  # uninstalled: no process-wide filter is left behind
