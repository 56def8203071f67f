"""The stdout sink: a closed pipe is counted and logged once, and writing again is logged once."""

from __future__ import annotations

import io
import logging

import pytest

from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.schemas.render import RenderedCycle
from falcon_gpu.sinks.config import StdoutSinkConfig
from falcon_gpu.sinks.stdout import StdoutSink
from tests.schemas.fixtures import cycle


class Pipe(io.StringIO):
    """A stream whose reader may go away (``broken``) and come back."""

    broken = False

    def write(self, text: str) -> int:
        if self.broken:
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(text)


def test_a_closed_pipe_is_counted_and_logged_once_and_recovery_once(caplog: pytest.LogCaptureFixture) -> None:
    telemetry, pipe = Telemetry(), Pipe()
    sink = StdoutSink(StdoutSinkConfig(type="stdout", format="prometheus"), telemetry=telemetry, stream=pipe)
    rendered = RenderedCycle(cycle())
    count = rendered.prometheus.sample_count()
    caplog.set_level(logging.INFO, logger="falcon_gpu")
    sink.submit(rendered)
    pipe.broken = True
    sink.submit(rendered)
    sink.submit(rendered)
    pipe.broken = False
    sink.submit(rendered)
    sink.submit(rendered)
    messages = [r.getMessage() for r in caplog.records]
    assert [m for m in messages if "cannot write" in m] == [
        "stdout sink 'stdout': cannot write: [Errno 32] Broken pipe"
    ]
    assert [m for m in messages if "writes again" in m] == ["stdout sink 'stdout' writes again"]
    view = telemetry.view()
    assert view.samples_total[("stdout", "sent")] == 3 * count
    assert view.samples_total[("stdout", "dropped")] == 2 * count
    assert view.errors_total == {"sink": 2}
    assert pipe.getvalue().count("# TYPE falcon_gpu_up gauge\n") == 3
