"""Build a sink object from its settings: the one table that maps ``type`` to a builder.

Each entry names the module whose ``build(config, ctx)`` makes that sink; the
module is imported on first use (remote_write pulls in protobuf and snappy, the
HTTP sinks requests: a plugin run with only stdout should not pay for them).
Adding a sink is one line here (see docs/SINKS.md, "Adding a sink").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks.base import Sink
from falcon_gpu.sinks.context import SinkContext

Builder = Callable[[Any, SinkContext], Sink]

BUILDERS: Mapping[str, str] = {
    "stdout": "falcon_gpu.sinks.stdout",
    "falcon_agent": "falcon_gpu.sinks.falcon_agent",
    "falcon_transfer": "falcon_gpu.sinks.falcon_transfer",
    "pushgateway": "falcon_gpu.sinks.pushgateway",
    "remote_write": "falcon_gpu.sinks.remote_write",
}
"""``type`` -> the module holding its ``build(config: <Type>SinkConfig, ctx: SinkContext)``."""


def builder(sink_type: str) -> Builder:
    """Raises ValueError for a sink type that has no implementation."""
    module = BUILDERS.get(sink_type)
    if module is None:
        raise ValueError(f"sink type {sink_type!r} is not implemented yet")
    build: Builder = importlib.import_module(module).build
    return build


def build_sink(
    config: Any, *, node: str, spool_dir: Path | str, spool_max_bytes: int, telemetry: Telemetry
) -> Sink:
    """Raises ValueError for a sink type that has no implementation."""
    return builder(config.type)(config, SinkContext(spool_dir, spool_max_bytes, telemetry, node))
