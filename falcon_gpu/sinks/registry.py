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

    def falcon_agent() -> Sink:
        from falcon_gpu.sinks.falcon_agent import FalconAgentSink

        return FalconAgentSink(
            config, spool_dir=spool_dir, spool_max_bytes=spool_max_bytes, telemetry=telemetry
        )

    builders["falcon_agent"] = falcon_agent

    def falcon_transfer() -> Sink:
        from falcon_gpu.sinks.falcon_transfer import FalconTransferSink

        return FalconTransferSink(
            config, spool_dir=spool_dir, spool_max_bytes=spool_max_bytes, telemetry=telemetry
        )

    builders["falcon_transfer"] = falcon_transfer

    def pushgateway() -> Sink:
        from falcon_gpu.sinks.pushgateway import PushgatewaySink

        return PushgatewaySink(config, node=node, telemetry=telemetry)

    builders["pushgateway"] = pushgateway

    def remote_write() -> Sink:
        from falcon_gpu.sinks.remote_write import RemoteWriteSink

        return RemoteWriteSink(
            config, spool_dir=spool_dir, spool_max_bytes=spool_max_bytes, telemetry=telemetry, node=node
        )

    builders["remote_write"] = remote_write
    try:
        return builders[config.type]()
    except KeyError:
        raise ValueError(f"sink type {config.type!r} is not implemented yet") from None
