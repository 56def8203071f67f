"""One sink's unexpected error costs only that sink's cycle: counted, logged once, recovery logged once."""

from __future__ import annotations

import logging

import pytest

from falcon_gpu.agent.cycle import CycleRunner
from falcon_gpu.model.snapshot import DeviceReading, Snapshot
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks.base import Rendered, Sink


class OneGpu:
    def collect(self, timestamp: float) -> Snapshot:
        return Snapshot(timestamp, True, devices=(DeviceReading(0, "GPU-a", "H100", "00:18.0"),))


class Recording(Sink):
    def __init__(self, name: str, fail_on: set[int]) -> None:
        self.name = name
        self.fail_on = fail_on
        self.cycles: list[int] = []
        self.calls = 0

    def submit(self, rendered: Rendered) -> None:
        self.calls += 1
        if self.calls in self.fail_on:
            raise RuntimeError(f"bug {self.calls}")
        self.cycles.append(rendered.prometheus.sample_count())


def test_a_failing_sink_is_counted_logged_once_and_the_other_sink_keeps_its_cycles(
    caplog: pytest.LogCaptureFixture,
) -> None:
    telemetry = Telemetry()
    flaky, steady = Recording("flaky", fail_on={2, 3}), Recording("steady", fail_on=set())
    runner = CycleRunner(
        node="n", step=1, source=OneGpu(), attributor=None, sinks=[flaky, steady], telemetry=telemetry
    )
    with caplog.at_level(logging.INFO, logger="falcon_gpu"):
        for _ in range(5):
            runner.run()
    assert len(steady.cycles) == 5 and len(flaky.cycles) == 3
    assert telemetry.view().errors_total["sink"] == 2
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("sink:flaky: unexpected error: RuntimeError('bug 2')") == 1
    assert not any("bug 3" in m for m in messages)  # still failing: not logged again
    assert messages.count("sink:flaky: works again") == 1
    assert not any("steady" in m for m in messages)
