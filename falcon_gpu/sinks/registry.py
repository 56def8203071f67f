"""Build a sink object from its settings: the one place that maps ``type`` to a class."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from falcon_gpu.sinks.base import Sink
from falcon_gpu.telemetry import Telemetry


def build_sink(config: Any, *, node: str, spool_dir: Any, spool_max_bytes: int, telemetry: Telemetry) -> Sink:
    """Raises ValueError for a sink type that has no implementation."""
    builders: dict[str, Callable[[], Sink]] = {}

    def stdout() -> Sink:
        from falcon_gpu.sinks.stdout import StdoutSink

        return StdoutSink(config, telemetry=telemetry)

    builders["stdout"] = stdout
    try:
        return builders[config.type]()
    except KeyError:
        raise ValueError(f"sink type {config.type!r} is not implemented yet") from None
