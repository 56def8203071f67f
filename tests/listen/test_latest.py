"""The latest-cycle holder and its HTTP server, in process: formats, gzip, health, stuck clients."""

from __future__ import annotations

import gzip
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from falcon_gpu.agent.cycle import CycleRunner
from falcon_gpu.agent.loop import run_every
from falcon_gpu.listen import LatestCycle, ListenServer, open_listener
from falcon_gpu.listen.server import wants_gzip, wants_openmetrics
from falcon_gpu.model.snapshot import Snapshot
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import ConfigError
from falcon_gpu.sinks.encoding import prom_text
from tests.delivery.conftest import prom_cycle, wait_until


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class CountingRendered:
    """Counts how often the schema is asked for, to prove one encoding serves many scrapes."""

    def __init__(self, value: float) -> None:
        self._inner = prom_cycle(1000, value).prometheus
        self.asked = 0
        self.threads: set[str] = set()

    @property
    def prometheus(self):  # type: ignore[no-untyped-def]
        self.asked += 1
        self.threads.add(threading.current_thread().name)
        return self._inner

    @property
    def falcon(self):  # type: ignore[no-untyped-def]
        return ()


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@pytest.fixture
def served() -> Iterator[tuple[LatestCycle, str]]:
    latest = LatestCycle(0.2)
    server = open_listener("127.0.0.1:0", latest)
    server.start()
    host, port = server.address
    yield latest, f"http://{host}:{port}"
    server.close()


def test_health_and_readiness_follow_the_cycles() -> None:
    clock = Clock()
    latest = LatestCycle(30, clock=clock)
    assert not latest.ready()
    assert latest.health()[0]  # just started: not late yet
    clock.now += 91
    ok, why = latest.health()
    assert not ok and "no cycle yet" in why
    latest.submit(prom_cycle(1, 1.0))
    assert latest.ready() and latest.health()[0]
    clock.now += 90  # exactly three intervals: still on time
    assert latest.health()[0]
    clock.now += 0.5
    ok, why = latest.health()
    assert not ok and "since the last cycle" in why and "90s" in why


def test_one_encoding_per_cycle_and_format() -> None:
    latest = LatestCycle(30)
    assert latest.body("text", gzipped=False) is None
    first = CountingRendered(0.5)
    latest.submit(first)
    bodies = {latest.body("text", gzipped=False) for _ in range(10)}
    assert bodies == {prom_text.encode(prom_cycle(1000, 0.5).prometheus).encode()}
    assert gzip.decompress(latest.body("text", gzipped=True) or b"") == bodies.pop()
    assert first.asked == 1  # ten plain scrapes and a gzip'd one: one rendering
    latest.submit(prom_cycle(2000, 0.25))
    assert b"falcon_gpu_utilization_ratio" in (latest.body("text", gzipped=False) or b"")
    assert b" 0.25\n" in (latest.body("text", gzipped=False) or b"")


def test_the_cycle_is_rendered_on_the_submitting_thread_never_by_a_scrape(
    served: tuple[LatestCycle, str],
) -> None:
    latest, url = served
    rendered = CountingRendered(0.5)
    submitter = threading.Thread(target=latest.submit, args=(rendered,), name="the-cycle")
    submitter.start()
    submitter.join(10)
    for headers in (
        {},
        {"Accept-Encoding": "gzip"},
        {"Accept": "application/openmetrics-text; version=1.0.0"},
    ):
        assert get(url + "/metrics", headers)[0] == 200
    assert rendered.threads == {"the-cycle"} and rendered.asked == 1


def test_a_body_asked_for_once_is_encoded_by_each_later_cycle_before_it_is_handed_over() -> None:
    latest = LatestCycle(30)
    latest.submit(prom_cycle(1000, 0.5))
    first = latest.body("openmetrics", gzipped=True)  # the first ask: encoded for the scrape
    assert first is not None and gzip.decompress(first).endswith(b"# EOF\n")
    latest.submit(prom_cycle(2000, 0.25))
    handed = latest._bodies  # what the hand-over swapped in, before any scrape of this cycle
    assert set(handed) == {("openmetrics", True)}
    assert latest.body("openmetrics", gzipped=True) is handed[("openmetrics", True)]
    assert b" 0.25\n" in gzip.decompress(handed[("openmetrics", True)])


def test_metrics_text_gzip_and_openmetrics_over_http(served: tuple[LatestCycle, str]) -> None:
    latest, url = served
    assert get(url + "/metrics")[0] == 503
    latest.submit(prom_cycle(1000, 0.5))
    expected = prom_text.encode(prom_cycle(1000, 0.5).prometheus).encode()
    status, headers, body = get(url + "/metrics")
    assert (status, body) == (200, expected)
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    status, headers, body = get(url + "/metrics", {"Accept-Encoding": "gzip"})
    assert headers["Content-Encoding"] == "gzip" and gzip.decompress(body) == expected
    status, headers, body = get(url + "/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    text = body.decode()
    assert "# TYPE falcon_gpu_energy_joules counter\n" in text  # family name without _total
    assert 'falcon_gpu_energy_joules_total{node="node-a",gpu="1",uuid="GPU-1"} 500\n' in text
    assert text.endswith("# EOF\n")
    assert get(url + "/nothing")[0] == 404


def test_healthz_turns_503_when_cycles_stop(served: tuple[LatestCycle, str]) -> None:
    latest, url = served
    assert get(url + "/readyz")[0] == 503
    latest.submit(prom_cycle(1000, 0.5))
    assert get(url + "/readyz")[0] == 200
    assert get(url + "/healthz")[0] == 200
    started = time.monotonic()
    wait_until(lambda: get(url + "/healthz")[0] == 503, 5, "/healthz to turn 503")
    assert time.monotonic() - started >= 0.5  # three intervals of 0.2 s, not sooner
    assert get(url + "/readyz")[0] == 200  # still ready: it did run once
    latest.submit(prom_cycle(2000, 0.5))
    assert get(url + "/healthz")[0] == 200


def test_a_stuck_client_does_not_block_a_scrape_or_a_hand_over(served: tuple[LatestCycle, str]) -> None:
    latest, url = served
    latest.submit(prom_cycle(1000, 0.5))
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port))) as silent, socket.create_connection((host, int(port))):
        silent.sendall(b"GET /metr")  # half a request line, then nothing
        started = time.monotonic()
        latest.submit(prom_cycle(2000, 0.75))
        assert get(url + "/metrics")[0] == 200
        assert b" 0.75\n" in get(url + "/metrics")[2]
        assert time.monotonic() - started < 1.0


def test_accept_headers() -> None:
    prometheus_242 = (
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
        "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    )
    assert wants_openmetrics(prometheus_242) and not wants_openmetrics("text/plain")
    assert wants_gzip("gzip") and wants_gzip("deflate, gzip;q=0.5") and not wants_gzip("gzip;q=0")
    assert not wants_gzip("") and not wants_gzip("identity")


@pytest.mark.parametrize("listen", ["nope", "127.0.0.1:0x10", "127.0.0.1:70000", "no-such-host.invalid:9410"])
def test_unusable_addresses_name_the_setting(listen: str) -> None:
    with pytest.raises(ConfigError, match="setting 'listen'"):
        open_listener(listen, LatestCycle(30))


def test_a_taken_port_names_the_setting() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=r"setting 'listen': cannot listen on .*in use"):
            open_listener(f"127.0.0.1:{port}", LatestCycle(30))


def test_ipv6_loopback() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    latest = LatestCycle(30)
    try:
        server: ListenServer = open_listener("[::1]:0", latest)
    except ConfigError as exc:
        pytest.skip(f"::1 cannot be bound here: {exc}")
    server.start()
    try:
        latest.submit(prom_cycle(1000, 0.5))
        assert get(f"http://[::1]:{server.address[1]}/readyz")[0] == 200
    finally:
        server.close()


def test_healthz_turns_503_when_the_agents_loop_hangs_in_nvml() -> None:
    """The real loop, cycle runner and server: after one good cycle NVML stops answering."""
    release, stop = threading.Event(), threading.Event()
    calls: list[float] = []

    class HangingSource:
        def collect(self, timestamp: float) -> Snapshot:
            calls.append(timestamp)
            if len(calls) > 1:
                release.wait(30)  # a driver call that does not come back
            return Snapshot(timestamp=timestamp, nvml_ok=True)

    telemetry = Telemetry()
    latest = LatestCycle(0.2)
    server = open_listener("127.0.0.1:0", latest)
    server.start()
    url = "http://{}:{}".format(*server.address)
    runner = CycleRunner(node="n", step=1, source=HangingSource(), attributor=None, sinks=[latest],
                         telemetry=telemetry)  # fmt: skip
    loop = threading.Thread(
        target=run_every, args=(0.2, runner.run, telemetry, stop), kwargs={"stuck_after": 1}
    )
    loop.start()
    try:
        wait_until(lambda: get(url + "/readyz")[0] == 200, 5, "the first cycle")
        assert b"falcon_gpu_agent_cycles_total" in get(url + "/metrics")[2]
        wait_until(lambda: len(calls) > 1, 5, "the second cycle to hang")
        status, _, why = get(url + "/healthz")
        assert status == 200, why  # not yet three intervals
        wait_until(lambda: get(url + "/healthz")[0] == 503, 5, "/healthz to turn 503")
        assert b"since the last cycle" in get(url + "/healthz")[2]
        assert get(url + "/metrics")[0] == 200  # the last good cycle is still served
    finally:
        stop.set()
        release.set()
        loop.join(10)
        server.close()


def test_the_root_page_links_the_endpoints_and_the_server_header_is_clean(
    served: tuple[LatestCycle, str],
) -> None:
    """A person who opens the port in a browser gets a page, not a 404 (issue 21)."""
    from html.parser import HTMLParser

    from falcon_gpu import __version__

    _, url = served
    status, headers, body = get(url + "/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    links: list[str] = []

    class Links(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            links.extend(v for k, v in attrs if tag == "a" and k == "href" and v)

    Links().feed(body.decode())
    assert links == ["/metrics", "/healthz", "/readyz"]
    for link in links:  # every link is a route (503 until the first cycle, never 404)
        assert get(url + link)[0] in (200, 503)
    for path in ("/", "/metrics", "/nope"):
        server = get(url + path)[1]["Server"]
        assert server == f"falcon-gpu/{__version__}", repr(server)
