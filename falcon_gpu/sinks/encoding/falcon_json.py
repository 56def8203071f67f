"""The Open-Falcon JSON body that falcon-agent's ``/v1/push`` and transfer's ``Transfer.Update`` read.

JSON has no NaN or infinity: Python would write the bare words ``NaN`` /
``Infinity``, which falcon-agent refuses as a whole request (HTTP 400: the batch
is lost) and transfer's Go decoder answers by closing the connection (the same
body is then re-sent for ever at the head of the spool). So an item whose value
is not finite is taken out before batching, alone, and counted by the sink.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from falcon_gpu.model.samples import FalconItem
from falcon_gpu.telemetry import Telemetry

if TYPE_CHECKING:
    from falcon_gpu.sinks.base import Rendered


def sendable(items: Sequence[FalconItem], telemetry: Telemetry, sink: str, key: str) -> Sequence[FalconItem]:
    """``items`` without those whose value is not finite; those are counted ``dropped`` and
    logged once per metric. The input itself when all are finite (the usual case)."""
    bad = [i for i in items if not math.isfinite(i.value)]
    if not bad:
        return items
    telemetry.samples(sink, "dropped", len(bad))
    telemetry.failing(
        f"{key}:invalid:{bad[0].metric}",
        "invalid_value",
        f"sink {sink}: not sending {bad[0].metric} {bad[0].tags}: value {bad[0].value} is not a JSON number",
    )
    return [i for i in items if math.isfinite(i.value)]


def encode(items: Sequence[FalconItem]) -> bytes:
    """The JSON array. Raises ValueError for a value that is not finite (see :func:`sendable`)."""
    return json.dumps([i.as_json() for i in items], separators=(",", ":"), allow_nan=False).encode()


class FalconJsonBatches:
    """The encoding half of a :class:`~falcon_gpu.delivery.pusher.BatchPusher` for the two
    Open-Falcon sinks (agent and transfer read the same JSON items); they add ``push``."""

    def __init__(self, name: str, telemetry: Telemetry) -> None:
        self.name = name
        self._telemetry = telemetry
        self._key = f"delivery:{name}"

    def explode(self, rendered: Rendered) -> Sequence[FalconItem]:
        return sendable(rendered.falcon, self._telemetry, self.name, self._key)

    def encode(self, items: Sequence[FalconItem]) -> bytes:
        return encode(items)

    def closing(self) -> Sequence[FalconItem]:
        return ()
