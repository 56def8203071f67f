"""Sinks composed with delivery (issue 9, "Delivery composes a sink"): a pusher only encodes
and classifies; the delivery paths queue, spool, retry and count, decide from their own
explicit state (never the telemetry's log keys), and import nothing from the sinks; each
sink type takes only the keys it uses."""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from falcon_gpu.delivery.outcome import Ack, PermanentError, RetryableError
from falcon_gpu.delivery.queued import QueuedDelivery
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import ConfigError, load_settings
from falcon_gpu.sinks import pushgateway, remote_write
from falcon_gpu.sinks.base import Rendered
from falcon_gpu.sinks.config import (
    FalconTransferSinkConfig,
    PushgatewaySinkConfig,
    RemoteWriteSinkConfig,
    types_taking,
)
from falcon_gpu.sinks.context import SinkContext
from falcon_gpu.sinks.registry import BUILDERS, builder
from tests.delivery.conftest import HttpPeer, falcon_cycle, outcomes, prom_cycle, wait_until

ROOT = Path(__file__).resolve().parents[2]
FAST = {"retry_initial_delay": 0.02, "retry_max_delay": 0.1}


# -- settings: each sink type takes only the keys it uses -------------------------------------
def load(tmp_path: Path, table: str) -> object:
    (tmp_path / "c.toml").write_text(f"[[sinks]]\n{table}\n")
    return load_settings(tmp_path / "c.toml").sinks[0]


@pytest.mark.parametrize(
    ("sink_type", "line"),
    [
        ("falcon_transfer", 'ca_file = "/etc/ssl/ca.pem"'),
        ("falcon_transfer", 'headers = { "X-Scope-OrgID" = "gpu" }'),
        ("falcon_transfer", 'bearer_token_file = "/run/token"'),
        ("falcon_transfer", 'basic_auth_user = "u"'),
        ("falcon_transfer", "insecure_skip_verify = true"),
        ("falcon_transfer", 'url = "http://127.0.0.1:8433"'),
        ("pushgateway", "batch_max_samples = 10"),
        ("pushgateway", "batch_max_age = 2"),
        ("pushgateway", "queue_max_batches = 10"),
    ],
)
def test_a_key_the_sink_type_does_not_use_exits_2_naming_it(
    tmp_path: Path, sink_type: str, line: str
) -> None:
    key = line.split(" ")[0]
    with pytest.raises(ConfigError) as err:
        load(tmp_path, f'type = "{sink_type}"\n{line}')
    users = ", ".join(types_taking(key))
    assert f"setting 'sinks.0.{sink_type}.{key}': a {sink_type} sink does not take it ({users} sinks do)" in (
        str(err.value)
    )
    assert sink_type not in users


def test_the_cli_exits_2_for_ca_file_on_falcon_transfer(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text('[[sinks]]\ntype = "falcon_transfer"\nca_file = "/x.pem"\n')
    done = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "run", "--once", "--config", str(tmp_path / "c.toml")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2, done.stderr
    assert "'sinks.0.falcon_transfer.ca_file'" in done.stderr


def test_a_key_no_sink_takes_is_still_an_unknown_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'sinks.0.remote_write.batch_size': unknown setting"):
        load(tmp_path, 'type = "remote_write"\nbatch_size = 5')


def test_every_key_each_sink_uses_still_loads(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("pw")
    queue_keys = "batch_max_samples = 100\nbatch_max_age = 2\nqueue_max_batches = 5\n"
    retry_keys = "retry_initial_delay = 0.1\nretry_max_delay = 5\ntimeout = 3\n"
    http_keys = (
        f'basic_auth_user = "u"\nbasic_auth_password_file = "{secret}"\n'
        'headers = { "X-Scope-OrgID" = "gpu" }\ninsecure_skip_verify = true\n'
    )
    transfer = load(
        tmp_path, f'type = "falcon_transfer"\naddress = "10.0.0.1:8433"\n{queue_keys}{retry_keys}'
    )
    assert isinstance(transfer, FalconTransferSinkConfig)
    assert (transfer.batch_max_samples, transfer.queue_max_batches, transfer.timeout) == (100, 5, 3.0)
    gateway = load(tmp_path, f'type = "pushgateway"\njob = "j"\ngzip = true\n{retry_keys}{http_keys}')
    assert isinstance(gateway, PushgatewaySinkConfig)
    assert (gateway.retry_max_delay, gateway.basic_auth_user, gateway.gzip) == (5.0, "u", True)
    writer = load(tmp_path, f'type = "remote_write"\nversion = 2\n{queue_keys}{retry_keys}{http_keys}')
    assert isinstance(writer, RemoteWriteSinkConfig)
    assert (writer.batch_max_age, writer.headers, writer.version) == (2.0, {"X-Scope-OrgID": "gpu"}, 2)


# -- packages and the registry ---------------------------------------------------------------
def test_delivery_imports_nothing_from_sinks() -> None:
    """Statically (every import in delivery/) and at run time (what importing it loads)."""
    for path in sorted((ROOT / "falcon_gpu" / "delivery").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("falcon_gpu.sinks"), (path.name, node.module)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("falcon_gpu.sinks") for a in node.names), path.name
    modules = [f"falcon_gpu.delivery.{p.stem}" for p in (ROOT / "falcon_gpu" / "delivery").glob("*.py")]
    code = f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
    code += "print(sorted(m for m in sys.modules if m.startswith('falcon_gpu.sinks')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_registry_has_a_builder_for_every_sink_type() -> None:
    assert sorted(BUILDERS) == sorted(types_taking("type"))
    for sink_type in BUILDERS:
        assert callable(builder(sink_type))
    with pytest.raises(ValueError, match="'carrier_pigeon' is not implemented"):
        builder("carrier_pigeon")


# -- a sink is a pusher composed with a delivery path ----------------------------------------
class ScriptedPusher:
    """A BatchPusher with no wire: answers from a script, records what it was given."""

    def __init__(self, answers: list[Ack | Exception]) -> None:
        self.answers = answers
        self.bodies: list[bytes] = []
        self.closed = False

    def explode(self, rendered: Rendered) -> Sequence[str]:
        return [f"{i.metric}={i.value:g}" for i in rendered.falcon]

    def encode(self, items: Sequence[str]) -> bytes:
        return ",".join(items).encode()

    def push(self, body: bytes, samples: int) -> Ack:
        self.bodies.append(body)
        answer = self.answers.pop(0) if self.answers else Ack()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def closing(self) -> Sequence[str]:
        return ["bye=1"]

    def check(self) -> tuple[bool, str]:
        return True, "scripted"

    def close(self) -> None:
        self.closed = True


def scripted(
    tmp_path: Path, telemetry: Telemetry, answers: list[Ack | Exception]
) -> QueuedDelivery[Rendered, str]:
    cfg = RemoteWriteSinkConfig(type="remote_write", name="scripted", batch_max_age=0.001, **FAST)  # type: ignore[arg-type]
    return SinkContext(tmp_path, 1 << 20, telemetry).queued(cfg, ScriptedPusher(answers))


def test_a_pusher_composed_with_the_queued_path_gets_order_retry_counting_and_closing(
    tmp_path: Path, telemetry: Telemetry
) -> None:
    answers: list[Ack | Exception] = [
        RetryableError("busy", retry_after=0.05),
        Ack(rejected=1),
        PermanentError("malformed"),
        ValueError("a bug in push"),
    ]
    sink = scripted(tmp_path, telemetry, answers)
    pusher = sink.sink
    assert isinstance(pusher, ScriptedPusher)
    sink.submit(falcon_cycle(1_700_000_000, 1.0, n=3))
    assert sink.flush(10)  # retried after Retry-After, then acknowledged with one item refused
    sink.submit(falcon_cycle(1_700_000_015, 2.0, n=2))
    assert sink.flush(10)  # refused for good: dropped, not retried
    sink.submit(falcon_cycle(1_700_000_030, 3.0, n=1))
    assert sink.flush(10)  # a bug in push: dropped, logged, the sender lives on
    assert sink.check() == (True, "scripted")
    sink.close(5)
    first = b"GPUUtils=1,GPUUtils=2,GPUUtils=3"
    assert pusher.bodies == [first, first, b"GPUUtils=2,GPUUtils=3", b"GPUUtils=3", b"bye=1"]
    assert outcomes(telemetry, "scripted") == {"sent": 2 + 1, "spooled": 3, "dropped": 1 + 2 + 1}
    assert telemetry.view().errors_total.get("sink_rejected") == 2
    assert pusher.closed and not sink.state.server_down


class KeyBlindTelemetry(Telemetry):
    """Telemetry whose log-once keys cannot be read: control flow must not need them."""

    def is_failing(self, key: str) -> bool:
        raise AssertionError(f"delivery read the log key {key!r}")


def test_shutdown_and_spooled_counts_come_from_the_explicit_state_not_log_keys(
    http_peer: HttpPeer, tmp_path: Path
) -> None:
    telemetry = KeyBlindTelemetry()
    cfg = RemoteWriteSinkConfig(
        type="remote_write",
        url=http_peer.url + "/api/v1/write",
        batch_max_age=0.001,
        stale_on_shutdown=False,
        **FAST,
    )  # type: ignore[arg-type]
    sink = remote_write.build(cfg, SinkContext(tmp_path, 1 << 20, telemetry))
    assert isinstance(sink, QueuedDelivery)
    http_peer.default = (503, {}, b"down")
    before = time.monotonic()
    sink.submit(prom_cycle(int(time.time() * 1000), 0.1))
    wait_until(lambda: sink.state.server_down, 10, "the outage noticed")
    assert before <= (sink.state.server_down_since or 0) <= time.monotonic()
    sink.submit(prom_cycle(int(time.time() * 1000) + 1000, 0.2))  # spooled while down: counted at once
    wait_until(lambda: outcomes(telemetry, "remote_write")["spooled"] == 8, 10, "both cycles spooled")
    assert not sink.flush(0.3)
    http_peer.default = (204, {}, b"")
    assert sink.flush(10)
    assert sink.state.server_down_since is None
    http_peer.default = (503, {}, b"down")
    sink.submit(prom_cycle(int(time.time() * 1000) + 2000, 0.3))
    wait_until(lambda: sink.state.server_down, 10, "the second outage")
    started = time.monotonic()
    sink.close(20)  # the server is down: the spool keeps the batch, shutdown does not wait 20 s
    assert time.monotonic() - started < 5
    assert outcomes(telemetry, "remote_write") == {"sent": 8, "spooled": 12, "dropped": 0}


def test_the_latest_state_path_reads_the_same_state(http_peer: HttpPeer) -> None:
    telemetry = KeyBlindTelemetry()
    cfg = PushgatewaySinkConfig(type="pushgateway", url=http_peer.url, **FAST)  # type: ignore[arg-type]
    sink = pushgateway.build(cfg, SinkContext("", 0, telemetry, node="n1"))
    http_peer.default = (500, {}, b"down")
    sink.submit(prom_cycle(int(time.time() * 1000), 0.1))
    wait_until(lambda: sink.state.server_down, 10, "the outage noticed")
    http_peer.default = (200, {}, b"")
    sink.submit(prom_cycle(int(time.time() * 1000), 0.2))
    assert sink.flush(10) and not sink.state.server_down
    http_peer.default = (500, {}, b"down")
    sink.submit(prom_cycle(int(time.time() * 1000), 0.3))
    wait_until(lambda: sink.state.server_down, 10, "the second outage")
    started = time.monotonic()
    sink.close(20)
    assert time.monotonic() - started < 5
    counted = outcomes(telemetry, "pushgateway")
    assert counted["sent"] in (4, 8) and counted["dropped"] == 0  # 8 if the first retry won the race
    assert http_peer.requests[-1].path == "/metrics/job/falcon_gpu/node/n1"
