"""The real agent's ``listen`` endpoint, scraped by the real Prometheus and compared with stdout."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.delivery.conftest import free_port, http_get, need, prom_query, wait_until
from tests.listen.scraper import start_scraper

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$")
COMPARED = {
    "falcon_gpu": (
        "falcon_gpu_info",
        "falcon_gpu_memory_used_bytes",
        "falcon_gpu_temperature_celsius",
        "falcon_gpu_health_worst",  # the default profile's (a passing check has no series)
        "falcon_gpu_pod_info",
        "falcon_gpu_pod_memory_used_bytes",
        "falcon_gpu_pod_energy_joules_total",
    ),
    # dcgm-exporter's names; its counters lack a lowercase _total, so OpenMetrics says "unknown"
    "dcgm": (
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",  # ECC is not among dcgm-exporter's default counters
        "falcon_gpu_pod_memory_used_bytes",
    ),
}


class Agent:
    def __init__(self, tmp_path: Path, *, interval: str = "1", schema: str = "falcon_gpu") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stdout = tmp_path / "agent.stdout"
        self.stderr = tmp_path / "agent.stderr"
        argv = [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "shared-gpu", "--interval", interval]
        env = {"FALCON_GPU_LISTEN": f"127.0.0.1:{self.port}", "FALCON_GPU_NODE": "listen-node",
               "FALCON_GPU_SCHEMA": schema, "FALCON_GPU_SPOOL_DIR": str(tmp_path / "spool"),
               "FALCON_GPU_SINKS": '[{"type": "stdout"}]',  # served, stdout only when asked for
               "PATH": "/usr/bin:/bin"}  # fmt: skip
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=ROOT, env=env)
        wait_until(self._ready, 30, "the agent's /readyz")

    def _ready(self) -> bool:
        assert self.proc.poll() is None, self.stderr.read_text()
        try:
            return http_get(self.url + "/readyz", timeout=1) == b"ready\n"
        except OSError:
            return False

    def latest_stdout(self) -> dict[tuple[str, str], float]:
        """The newest value of every series the stdout sink printed."""
        values: dict[tuple[str, str], float] = {}
        for line in self.stdout.read_text().splitlines():
            found = SAMPLE.match(line)
            if found:
                values[(found[1], found[2] or "")] = float(found[3])
        return values

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    running = Agent(tmp_path)
    yield running
    if running.proc.poll() is None:
        assert running.stop() == 0


def labels_of(text: str) -> frozenset[tuple[str, str]]:
    return frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', text))


def test_metrics_is_the_cycle_stdout_printed(agent: Agent) -> None:
    def body() -> str:
        return http_get(agent.url + "/metrics").decode()

    # two pods share GPU 0 (nvidia.com/gpu.shared); attribution may need a cycle to catch up
    wait_until(lambda: 'pod="jupyter-alice"' in body() and 'pod="jupyter-bob"' in body(), 10, "pods")
    served = body()
    wait_until(lambda: served in agent.stdout.read_text(), 10, "stdout to print the served cycle")
    need("promtool")
    lint = subprocess.run(["promtool", "check", "metrics"], input=served.encode(), capture_output=True)
    assert lint.returncode == 0, lint.stderr.decode() + lint.stdout.decode()


@pytest.mark.servers
@pytest.mark.parametrize("schema", sorted(COMPARED))
def test_prometheus_scrapes_what_stdout_prints(schema: str, tmp_path: Path) -> None:
    need("prometheus")
    agent = Agent(tmp_path, schema=schema)
    compared = COMPARED[schema]
    server = start_scraper(
        tmp_path, f"  - job_name: falcon_gpu\n    static_configs: [{{targets: ['127.0.0.1:{agent.port}']}}]\n"
    )
    try:
        selector = '{__name__=~"' + "|".join(compared) + '", job="falcon_gpu"}'

        def scraped() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
            got = {}
            for r in prom_query(server, selector):
                metric = dict(r["metric"])
                name = metric.pop("__name__")
                assert metric.pop("job") == "falcon_gpu"
                assert metric.pop("instance") == f"127.0.0.1:{agent.port}"
                got[(name, frozenset(metric.items()))] = float(r["value"][1])
            return got

        def printed() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
            return {
                (name, labels_of(labels)): v
                for (name, labels), v in agent.latest_stdout().items()
                if name in compared
            }

        # the scenario's values settle after three cycles; then both must agree exactly
        wait_until(lambda: len(printed()) > 15 and scraped() == printed(), 30, "Prometheus to match stdout")
        assert {name for name, _ in printed()} == set(compared)  # every compared metric is there
        targets = http_get(server.url + "/api/v1/targets").decode()
        assert '"health":"up"' in targets
        pods = {dict(k[1])["pod"] for k in scraped() if k[0] == "falcon_gpu_pod_memory_used_bytes"}
        assert {"jupyter-alice", "jupyter-bob"} <= pods
    finally:
        server.stop()
        assert agent.stop() == 0


def test_a_stuck_client_does_not_delay_cycles(tmp_path: Path) -> None:
    agent = Agent(tmp_path, interval="0.3")
    try:

        def cycles() -> float:
            body = http_get(agent.url + "/metrics").decode()
            return float(re.search(r"^falcon_gpu_agent_cycles_total\{[^}]*\} (\S+)$", body, re.M)[1])  # type: ignore[index]

        silent = [socket.create_connection(("127.0.0.1", agent.port)) for _ in range(5)]
        silent[0].sendall(b"GET /metrics HTTP/1.1\r\n")  # headers never finished
        before, started = cycles(), time.monotonic()
        time.sleep(1.5)
        done = cycles() - before
        assert done >= 0.8 * (time.monotonic() - started) / 0.3 - 1, done  # every cycle on time
        with urllib.request.urlopen(agent.url + "/healthz", timeout=2) as resp:
            assert resp.status == 200
        for s in silent:
            s.close()
    finally:
        assert agent.stop() == 0


@pytest.mark.parametrize("listen", ["nope", "127.0.0.1:99999", "taken"])
def test_an_unusable_listen_exits_2_naming_it(listen: str, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        if listen == "taken":
            listen = f"127.0.0.1:{taken.getsockname()[1]}"
        done = subprocess.run(
            [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "--once"],
            env={"FALCON_GPU_LISTEN": listen, "FALCON_GPU_SPOOL_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            cwd=ROOT,
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    assert b"setting 'listen'" in done.stderr and b"Traceback" not in done.stderr
