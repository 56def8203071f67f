"""A pod log directory whose name is not UTF-8 (the file system allows any bytes) on a simulated
node: the real agent serves ``/metrics`` and pushes to a real Prometheus remote-write receiver and a
real Pushgateway, and the pod's series arrive everywhere under its name decoded with replacement
(U+FFFD for the byte that is not UTF-8). Before the boundary decoded names, ``/metrics`` closed
every connection and both sinks dropped every batch (``UnicodeEncodeError: surrogates not allowed``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from falcon_gpu.simulator.node.layout import HostPaths, SimulatedHost
from falcon_gpu.simulator.scenario.parse import load_scenario, resolve_scenario
from tests.delivery.conftest import ManagedServer, free_port, http_get, prom_query, wait_until

ROOT = Path(__file__).resolve().parents[2]
POD = "jupyter-alice"
RAW = b"jupyter-al\xffce"
"""The pod's name on disk: one byte that is not UTF-8."""
SHOWN = "jupyter-al\ufffdce"
"""What every sink carries."""


def rename_pod(log_root: Path) -> None:
    """Give ``POD`` its non-UTF-8 name in ``pods/`` and ``containers/``, as bytes paths."""
    pods = os.fsencode(log_root / "pods")
    containers = os.fsencode(log_root / "containers")
    old = next(n for n in os.listdir(pods) if n.split(b"_")[1] == POD.encode())
    new = old.replace(POD.encode(), RAW)
    os.rename(pods + b"/" + old, pods + b"/" + new)
    for name in os.listdir(containers):
        if name.startswith(POD.encode() + b"_"):
            target = os.readlink(containers + b"/" + name).replace(old, new)
            os.unlink(containers + b"/" + name)
            os.symlink(target, containers + b"/" + name.replace(POD.encode(), RAW))
    assert any(RAW in n for n in os.listdir(pods)) and any(RAW in n for n in os.listdir(containers))


@pytest.fixture
def host(tmp_path: Path) -> Iterator[HostPaths]:
    scenario = load_scenario(resolve_scenario("shared-gpu"))
    assert scenario.host is not None
    simulated = SimulatedHost(scenario.host, tmp_path / "host")
    paths = simulated.start()
    rename_pod(paths.log_root)
    yield paths
    simulated.stop()


def test_a_non_utf8_pod_name_reaches_listen_remote_write_and_pushgateway(
    host: HostPaths, prometheus: ManagedServer, pushgateway: ManagedServer, tmp_path: Path
) -> None:
    port = free_port()
    sinks = [
        {"type": "remote_write", "url": f"{prometheus.url}/api/v1/write", "batch_max_age": 0.2},
        {"type": "pushgateway", "url": pushgateway.url},
    ]
    env = {
        "PATH": "/usr/bin:/bin",
        "FALCON_GPU_NODE": "bytes-node",
        "FALCON_GPU_LISTEN": f"127.0.0.1:{port}",
        "FALCON_GPU_SPOOL_DIR": str(tmp_path / "spool"),
        "FALCON_GPU_SINKS": json.dumps(sinks),
        "FALCON_GPU_JOBS_DIR": str(tmp_path / "jobs"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "FALCON_GPU_PROC_ROOT": str(host.proc_root),
        "FALCON_GPU_LOG_ROOT": str(host.log_root),
        "FALCON_GPU_KUBELET_SOCKET": str(host.kubelet_socket),
        "FALCON_GPU_DOCKER_ROOT": str(host.docker_root),
        "FALCON_GPU_CONTAINERS_ROOT": str(host.containers_root),
        "FALCON_GPU_PASSWD_FILE": str(host.passwd_file),
    }
    argv = [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "shared-gpu", "--interval", "1"]
    stderr = tmp_path / "agent.stderr"
    with stderr.open("wb") as err:
        agent = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        series = f'pod="{SHOWN}"'

        def scraped() -> bool:
            assert agent.poll() is None, stderr.read_text()
            try:
                return series in http_get(f"http://127.0.0.1:{port}/metrics", timeout=2).decode()
            except OSError:
                return False

        wait_until(scraped, 60, f"/metrics to serve {series}")
        # PromQL refuses a raw U+FFFD in a query (Go's "invalid UTF-8 rune"); its escape is fine
        query = 'falcon_gpu_pod_memory_used_bytes{pod="jupyter-al\\ufffdce"}'
        wait_until(lambda: bool(prom_query(prometheus, query)), 60, f"Prometheus to store {series}")
        wait_until(lambda: series in http_get(f"{pushgateway.url}/metrics").decode(), 60,
                   f"the Pushgateway to hold {series}")  # fmt: skip
        stored = prom_query(prometheus, query)[0]["metric"]
        assert stored["namespace"] == "team-a" and stored["pod"] == SHOWN
        groups = http_get(f"{pushgateway.url}/api/v1/metrics").decode()
        assert urllib.parse.quote(SHOWN) not in groups  # the grouping key is the node's, not the pod's
        assert "UnicodeEncodeError" not in stderr.read_text()
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(30)


HOSTILE = ("tr\udcffin", "a\x00b", "line\nbreak", 'quote"d', "back\\slash", "\u2028sep", "tab\tx", "\x7f\x01",
           "x" * 2000, "\U0001f600", ".", "..", "a/b", "\ufffd")  # fmt: skip


@pytest.mark.servers
def test_hostile_label_values_reach_real_prometheus_and_pushgateway_intact(
    prometheus: ManagedServer, pushgateway: ManagedServer, tmp_path: Path
) -> None:
    """What the reference decoders accept (tests/fuzz), the real servers store: one series per name."""
    import time

    from falcon_gpu.model.samples import Family, PromBatch, Series
    from falcon_gpu.model.telemetry import Telemetry
    from falcon_gpu.model.text import utf8_text
    from tests.delivery.conftest import FakeRendered, outcomes
    from tests.delivery.test_pushgateway import sink_for as pushgateway_sink
    from tests.delivery.test_remote_write import sink_for as remote_write_sink

    family = Family("falcon_gpu_pod_processes", "gauge", "p",
                    tuple(Series((("pod", name),), float(i)) for i, name in enumerate(HOSTILE)))  # fmt: skip
    now = int(time.time() * 1000)
    cycle = FakeRendered(PromBatch(now, (family,)))
    telemetry = Telemetry()
    sinks = [remote_write_sink(f"{prometheus.url}/api/v1/write", tmp_path, telemetry),
             pushgateway_sink(pushgateway.url, telemetry)]  # fmt: skip
    for sink in sinks:
        sink.submit(cycle)
        assert sink.flush(10)
        sink.close(5)
    assert outcomes(telemetry, "remote_write")["sent"] == 2 * len(HOSTILE)  # and the shutdown's markers
    assert outcomes(telemetry, "pushgateway")["sent"] == len(HOSTILE)
    expected = sorted(utf8_text(n) for n in HOSTILE)
    stored = prom_query(prometheus, "falcon_gpu_pod_processes", at=now)
    assert sorted(s["metric"]["pod"] for s in stored) == expected
    groups = json.loads(http_get(f"{pushgateway.url}/api/v1/metrics"))["data"]
    pushed = groups[0]["falcon_gpu_pod_processes"]["metrics"]
    assert sorted(m["labels"]["pod"] for m in pushed) == expected
