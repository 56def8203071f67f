"""The stdout sink: one cycle per write, in Open-Falcon JSON, Prometheus text or JSON.

Writes go straight to the process's stdout (a local pipe or terminal), so no
queue is needed; a closed pipe is reported once and the agent keeps running.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks.base import Rendered, Sink
from falcon_gpu.sinks.config import StdoutSinkConfig
from falcon_gpu.sinks.context import SinkContext
from falcon_gpu.sinks.encoding import falcon_json, prom_text


def encode(
    rendered: Rendered,
    fmt: str,
    series: prom_text.SeriesText | None = None,
    items: falcon_json.ItemText | None = None,
) -> str:
    """The text one cycle becomes in ``fmt``; ends with a newline. ``series``, ``items``: the sink's
    encoder caches, kept across its cycles (None: fresh ones)."""
    if fmt == "falcon":
        return falcon_json.text(rendered.falcon, allow_nan=True, cache=items) + "\n"
    batch = rendered.prometheus
    if fmt == "prometheus":
        return prom_text.encode(batch, series)
    samples = [
        {"name": f.name, "type": f.kind, "labels": dict(s.labels), "value": s.value}
        for f in batch.families
        for s in f.series
    ]
    return json.dumps({"timestamp_ms": batch.timestamp_ms, "samples": samples}, separators=(",", ":")) + "\n"


class StdoutSink(Sink):
    def __init__(
        self, config: StdoutSinkConfig, *, telemetry: Telemetry, stream: TextIO | None = None
    ) -> None:
        self.name = config.name
        self.format = config.format
        self._stream = stream
        self._telemetry = telemetry
        self._key = f"sink:{self.name}"
        self._again = f"stdout sink {self.name!r} writes again"
        """Formatted once: the success path of every cycle formats nothing."""
        self._series = prom_text.SeriesText()
        self._items = falcon_json.ItemText()
        """This sink's encoder caches (it encodes on the cycle's thread, in ``submit``)."""
        telemetry.register_sink(self.name)

    def submit(self, rendered: Rendered) -> None:
        text = encode(rendered, self.format, self._series, self._items)
        count = len(rendered.falcon) if self.format == "falcon" else rendered.prometheus.sample_count()
        stream = self._stream or sys.stdout
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError) as exc:  # closed pipe or closed file
            self._telemetry.failing(self._key, "sink", f"stdout sink {self.name!r}: cannot write: {exc}")
            self._telemetry.samples(self.name, "dropped", count)
            return
        self._telemetry.recovered(self._key, self._again)
        self._telemetry.samples(self.name, "sent", count)


def build(config: StdoutSinkConfig, ctx: SinkContext) -> StdoutSink:
    return StdoutSink(config, telemetry=ctx.telemetry)
