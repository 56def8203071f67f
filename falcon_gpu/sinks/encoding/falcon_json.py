"""The Open-Falcon JSON body that falcon-agent's ``/v1/push`` and transfer's ``Transfer.Update`` read.

JSON has no NaN or infinity: Python would write the bare words ``NaN`` /
``Infinity``, which falcon-agent refuses as a whole request (HTTP 400: the batch
is lost) and transfer's Go decoder answers by closing the connection (the same
body is then re-sent for ever at the head of the spool). So an item whose value
is not finite is taken out before batching, alone, and counted by the sink.

The text is exactly ``json.dumps([item.as_json(), ...], separators=(",", ":"))``,
but built without a dictionary and a generic encoder pass per item: the same series
(endpoint, metric, tags, step, counter type) come back every cycle, so the JSON
around an item's timestamp and value is rendered (and its strings escaped) once
(:class:`ItemText`, bounded), and a cycle formats only the two numbers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from falcon_gpu.model.samples import FalconItem
from falcon_gpu.model.telemetry import Telemetry

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


MAX_CACHED: Final = 65_536
_NOT_FINITE: Final = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
"""What ``json.dumps`` writes for a float that is not finite (when ``allow_nan``)."""

_Series = tuple[str, str, str, int, str]


class ItemText:
    """Per series, the JSON text before the timestamp, between it and the value, and after the
    value (``'{"endpoint":..,"metric":..,"timestamp":'``, ``',"step":60,"value":'``,
    ``',"counterType":..,"tags":..}'``). Bounded by ``limit`` series (a new dict when full)."""

    __slots__ = ("_parts", "limit")

    def __init__(self, limit: int = MAX_CACHED) -> None:
        self.limit = limit
        self._parts: dict[_Series, tuple[str, str, str]] = {}

    def __len__(self) -> int:
        return len(self._parts)

    def text(self, items: Sequence[FalconItem], *, allow_nan: bool = False) -> str:
        """The JSON array of ``items``. Raises ValueError for a value that is not finite unless
        ``allow_nan`` (then ``NaN``/``Infinity``, as ``json.dumps`` writes them)."""
        parts = self._parts
        out: list[str] = []
        append = out.append
        for i in items:
            key = (i.endpoint, i.metric, i.tags, i.step, i.counter_type)
            around = parts.get(key)
            if around is None:
                around = self._render(key)
                parts = self._parts
            value = i.value
            number = float.__repr__(value) if type(value) is float else _number(value)
            if number in _NOT_FINITE:
                if not allow_nan:
                    raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
                number = _NOT_FINITE[number]
            stamp = i.timestamp
            stamp_text = int.__repr__(stamp) if type(stamp) is int else _number(stamp)
            append(f"{around[0]}{stamp_text}{around[1]}{number}{around[2]}")
        return "[" + ",".join(out) + "]"

    def _render(self, key: _Series) -> tuple[str, str, str]:
        endpoint, metric, tags, step, counter_type = key
        if len(self._parts) >= self.limit:
            self._parts = {}
        dumps = json.dumps
        around = self._parts[key] = (
            f'{{"endpoint":{dumps(endpoint)},"metric":{dumps(metric)},"timestamp":',
            f',"step":{dumps(step)},"value":',
            f',"counterType":{dumps(counter_type)},"tags":{dumps(tags)}}}',
        )
        return around


def _number(value: object) -> str:
    """A value that is not a float, as ``json.dumps`` writes it (an int, a bool, a float subclass)."""
    if isinstance(value, float):
        return float.__repr__(value)
    return json.dumps(value)


def text(items: Sequence[FalconItem], *, allow_nan: bool = False, cache: ItemText | None = None) -> str:
    """The JSON array as text (the stdout sink's ``falcon`` format passes ``allow_nan``). ``cache``: the
    caller's, kept across its cycles (None: a fresh one, nothing reused)."""
    return (cache if cache is not None else ItemText()).text(items, allow_nan=allow_nan)


def encode(items: Sequence[FalconItem], cache: ItemText | None = None) -> bytes:
    """The JSON array. Raises ValueError for a value that is not finite (see :func:`sendable`)."""
    return text(items, cache=cache).encode()


class FalconJsonBatches:
    """The encoding half of a :class:`~falcon_gpu.delivery.pusher.BatchPusher` for the two
    Open-Falcon sinks (agent and transfer read the same JSON items); they add ``push``. Each keeps
    its own :class:`ItemText`, used by its delivery's batcher thread (the one that encodes)."""

    def __init__(self, name: str, telemetry: Telemetry) -> None:
        self.name = name
        self._telemetry = telemetry
        self._key = f"delivery:{name}"
        self._items = ItemText()

    def explode(self, rendered: Rendered) -> Sequence[FalconItem]:
        return sendable(rendered.falcon, self._telemetry, self.name, self._key)

    def encode(self, items: Sequence[FalconItem]) -> bytes:
        return encode(items, self._items)

    def closing(self) -> Sequence[FalconItem]:
        return ()
