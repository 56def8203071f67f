"""``/metrics`` scraped over HTTP while cycles run: every body is the cycle it came from, whole.

The cycle thread renders and encodes the bodies and hands them over (listen/latest.py); a scraper
never renders nor touches an encoder's cache. Here the real cycle runner, with a stdout sink that
encodes Prometheus text on the same thread, runs cycles whose values change every time, while
scrapers ask for text, gzip'd text and OpenMetrics; afterwards each body is compared byte for byte
with a fresh encoding (fresh schema caches, fresh encoder) of the cycle it names in
``falcon_gpu_agent_cycles_total``.
"""

from __future__ import annotations

import gzip
import io
import re
import threading
import urllib.request

from msgspec.structs import replace

from falcon_gpu.agent.cycle import CycleRunner
from falcon_gpu.listen import LatestCycle, open_listener, openmetrics
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.snapshot import Snapshot
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.schemas import falcon_gpu
from falcon_gpu.sinks.config import StdoutSinkConfig
from falcon_gpu.sinks.encoding import prom_text
from falcon_gpu.sinks.stdout import StdoutSink
from tests.delivery.conftest import wait_until
from tests.schemas.fixtures import cycle

CYCLES = 40
ASKS = {
    "text": {},
    "gzip": {"Accept-Encoding": "gzip"},
    "openmetrics": {"Accept": "application/openmetrics-text; version=1.0.0"},
}
CYCLE_OF = re.compile(rb'^falcon_gpu_agent_cycles_total\{node="n"\} (\d+)$', re.MULTILINE)


class ChangingSource:
    """The schema fixture's node, its first GPU's power and energy new every cycle."""

    def __init__(self) -> None:
        self._snapshot = cycle().snapshot
        self._n = 0

    def collect(self, timestamp: float) -> Snapshot:
        self._n += 1
        first, *rest = self._snapshot.devices
        changed = replace(first, power_watts=100.0 + self._n / 4, energy_joules=1000.0 * self._n)
        return replace(self._snapshot, timestamp=timestamp, devices=(changed, *rest))


def scrape(url: str, ask: str) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(url, headers=ASKS[ask]), timeout=10) as resp:
        assert resp.status == 200
        body: bytes = resp.read()
    return gzip.decompress(body) if ask == "gzip" else body


def fresh(data: CycleData, ask: str) -> bytes:
    batch = falcon_gpu.render(data)  # fresh schema caches
    text = openmetrics.encode(batch) if ask == "openmetrics" else prom_text.encode(batch)  # fresh encoder
    return text.encode()


def test_every_scraped_body_is_a_fresh_encoding_of_its_cycle() -> None:
    telemetry = Telemetry()
    latest = LatestCycle(30)
    stdout = StdoutSink(
        StdoutSinkConfig(type="stdout", name="stdout"), telemetry=telemetry, stream=io.StringIO()
    )
    runner = CycleRunner(
        node="n",
        step=1,
        source=ChangingSource(),
        attributor=None,
        sinks=[latest, stdout],
        telemetry=telemetry,
    )
    server = open_listener("127.0.0.1:0", latest)
    server.start()
    url = "http://{}:{}/metrics".format(*server.address)
    ran: dict[int, CycleData] = {}
    done = threading.Event()
    scraped: list[tuple[str, bytes]] = []
    failed: list[BaseException] = []

    def cycles() -> None:
        try:
            for _ in range(CYCLES):
                data = runner.run().cycle
                ran[data.telemetry.cycles_total] = data
                done.wait(0.01)  # pacing only: scrapes land between and during cycles
        finally:
            done.set()

    def scraper(ask: str) -> None:
        try:
            while not done.is_set():
                scraped.append((ask, scrape(url, ask)))
        except BaseException as exc:
            failed.append(exc)

    try:
        loop = threading.Thread(target=cycles)
        loop.start()
        wait_until(latest.ready, 10, "the first cycle")
        scrapers = [threading.Thread(target=scraper, args=(ask,)) for ask in ASKS for _ in range(2)]
        for t in scrapers:
            t.start()
        loop.join(60)
        for t in scrapers:
            t.join(30)
    finally:
        server.close()
    assert not failed, failed
    assert len(ran) == CYCLES
    seen: set[int] = set()
    for ask, body in scraped:
        (number,) = CYCLE_OF.findall(body)
        seen.add(int(number))
        assert body == fresh(ran[int(number)], ask), f"{ask} body of cycle {int(number)}"
    assert {ask for ask, _ in scraped} == set(ASKS)
    assert len(seen) > 1, "the scrapes met more than one cycle"
