"""Shutdown of the long-lived parts: sinks close side by side, and a hung one cannot hold it up."""

from __future__ import annotations

import threading
import time

from falcon_gpu.agent.runtime import Runtime
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks.base import Rendered, Sink


class SlowSink(Sink):
    def __init__(self, name: str, barrier: threading.Barrier | None, hang: threading.Event | None = None):
        self.name = name
        self._barrier = barrier
        self._hang = hang
        self.closed_with: float | None = None
        self.met_the_others = False

    def submit(self, rendered: Rendered) -> None:
        pass

    def close(self, timeout: float) -> None:
        self.closed_with = timeout
        if self._hang is not None:
            self._hang.wait(30)
            return
        assert self._barrier is not None
        self._barrier.wait(10)  # passes only when every sink is closing at the same time
        self.met_the_others = True


class Closing:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def runtime(sinks: list[Sink], source: Closing) -> Runtime:
    return Runtime(None, Telemetry(), None, source, None, None, sinks)  # type: ignore[arg-type]


def test_sinks_close_side_by_side_each_with_the_whole_timeout() -> None:
    barrier = threading.Barrier(3)
    sinks = [SlowSink(f"s{i}", barrier) for i in range(3)]
    source = Closing()
    runtime(list(sinks), source).close(timeout=7.0)
    assert [(s.met_the_others, s.closed_with) for s in sinks] == [(True, 7.0)] * 3
    assert source.closed


def test_a_hung_sink_does_not_hold_up_shutdown() -> None:
    hang = threading.Event()
    source = Closing()
    try:
        started = time.monotonic()
        runtime([SlowSink("stuck", None, hang)], source).close(timeout=0.5)
        assert time.monotonic() - started < 20  # bounded by timeout + 1 s, not by the sink
        assert source.closed  # NVML and the rest still closed
    finally:
        hang.set()


def test_nvml_is_left_alone_when_a_cycle_is_stuck_inside_it() -> None:
    sink, source = SlowSink("s", threading.Barrier(1)), Closing()
    runtime([sink], source).close(timeout=1.0, nvml=False)
    assert sink.met_the_others and not source.closed
