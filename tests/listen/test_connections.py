"""Issue 19.3 in process: one deadline per request, the connection limit, a burst and the backlog."""

from __future__ import annotations

import contextlib
import resource
import selectors
import socket
import time
from collections.abc import Iterator

import pytest

from falcon_gpu.listen import LatestCycle, ListenServer, open_listener
from falcon_gpu.model.telemetry import Telemetry
from tests.delivery.conftest import http_get, prom_cycle, wait_until

BURST = 1000


@pytest.fixture
def latest() -> LatestCycle:
    cycle = LatestCycle(30)
    cycle.submit(prom_cycle(20, 1.0))
    return cycle


@contextlib.contextmanager
def serve(latest: LatestCycle, **kwargs: object) -> Iterator[ListenServer]:
    server = open_listener("127.0.0.1:0", latest, **kwargs)  # type: ignore[arg-type]
    server.start()
    try:
        yield server
    finally:
        server.close()


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_the_deadline_is_for_the_whole_request_not_per_byte(latest: LatestCycle) -> None:
    with serve(latest, request_deadline=1.0) as server, socket.create_connection(server.address) as slow:
        slow.sendall(b"GET /metrics HTTP/1.1\r\n")
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < 5 and not closed:
            slow.sendall(b"X")  # a byte every 0.2 s restarted the old per-byte timeout forever
            closed = closed_by_peer(slow, 0.2)
        assert closed and time.monotonic() - started < 2.5


def test_past_the_limit_the_longest_waiting_connection_makes_room(latest: LatestCycle) -> None:
    telemetry = Telemetry()
    with serve(latest, max_connections=4, telemetry=telemetry) as server:
        url = "http://{}:{}".format(*server.address)
        idle = [socket.create_connection(server.address) for _ in range(4)]
        wait_until(lambda: server.open_connections == 4, 5, "four connections held")
        assert http_get(url + "/readyz", timeout=2) == b"ready\n"  # answered at once
        assert closed_by_peer(idle[0], 2)  # the oldest silent one went
        assert server.open_connections <= 4
        assert telemetry.view().errors_total["listen_connections"] >= 1
        for s in idle:
            s.close()


def test_a_burst_of_1000_simultaneous_scrapes_is_answered(latest: LatestCycle) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < BURST + 100:
        pytest.skip(f"this process may open only {hard} descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, BURST + 100), hard))
    with serve(latest) as server:  # the default limit: 64
        sel = selectors.DefaultSelector()
        answers: dict[socket.socket, bytes] = {}
        for _ in range(BURST):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(server.address)
            sel.register(s, selectors.EVENT_WRITE)
        started = time.monotonic()
        while sel.get_map() and time.monotonic() - started < 20:
            for key, mask in sel.select(0.5):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                if mask & selectors.EVENT_WRITE:
                    try:
                        s.send(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    except BlockingIOError:
                        continue
                    sel.modify(s, selectors.EVENT_READ)
                    continue
                try:
                    chunk = s.recv(4096)
                except (BlockingIOError, ConnectionResetError):
                    chunk = b""
                answers[s] = answers.get(s, b"") + chunk
                if not chunk:
                    sel.unregister(s)
                    s.close()
        elapsed = time.monotonic() - started
        ok = sum(1 for a in answers.values() if a.startswith(b"HTTP/1.1 200"))
        assert ok == BURST, (ok, elapsed)
        assert elapsed < 15, elapsed  # with a backlog of 5: 180 of 1,000 answered within 30 s


def test_when_every_connection_is_stuck_in_its_answer_newcomers_get_503_at_once() -> None:
    big = LatestCycle(30)
    big.submit(prom_cycle(20, 1.0, gpus=60000))  # ~7 MB: more than the socket buffers hold
    assert len(big.body("text", gzipped=False) or b"") > 6_000_000  # encoded once, before the clock
    with serve(big, max_connections=2) as server:
        held = []
        for _ in range(2):  # clients that ask and do not read: each answer is stuck in its write
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(server.address)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            held.append(s)
        wait_until(lambda: server.open_connections == 2, 5, "two answers in progress")
        started = time.monotonic()
        with socket.create_connection(server.address) as newcomer:
            newcomer.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
            newcomer.settimeout(10)
            answer = newcomer.recv(4096)
        assert answer.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in answer, answer
        assert time.monotonic() - started < 1.0 + 1.5  # STUCK_S, plus a loaded machine's slack
        for s in held:
            s.close()
        wait_until(lambda: server.open_connections == 0, 5, "the stuck answers to end")
        assert http_get("http://{}:{}/readyz".format(*server.address)) == b"ready\n"
