"""What schemas produce and sinks consume: named, labelled values with no wire format.

Two families exist because the two worlds disagree on shape: Prometheus metric
families (name, type, help, labelled series) and Open-Falcon items
(endpoint/metric/tags/step/counterType). Both are immutable (:mod:`falcon_gpu.model.record`
says how they are declared).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Final, Literal

from falcon_gpu.model.record import Record

MetricKind = Literal["gauge", "counter"]
Labels = tuple[tuple[str, str], ...]


class Series(Record):
    """One labelled value: a plain class, not a NamedTuple, as thousands are built a cycle."""

    __slots__ = _fields = ("labels", "value")

    def __init__(self, labels: Labels, value: float) -> None:
        self.labels: Final = labels
        self.value: Final = value


class Family(Record):
    """A Prometheus metric family: every series of one metric name in one cycle (built per family
    a cycle: its own ``__init__``)."""

    __slots__ = _fields = ("name", "kind", "help", "series")

    def __init__(self, name: str, kind: MetricKind, help: str, series: tuple[Series, ...]) -> None:
        self.name: Final = name
        self.kind: Final = kind
        self.help: Final = help
        self.series: Final = series


class FalconItem(Record):
    """One Open-Falcon data point, exactly the fields of falcon-agent's push API (built per item
    a cycle: its own ``__init__``)."""

    __slots__ = _fields = ("endpoint", "metric", "timestamp", "step", "value", "counter_type", "tags")

    def __init__(
        self,
        endpoint: str,
        metric: str,
        timestamp: int,
        step: int,
        value: float,
        counter_type: Literal["GAUGE", "COUNTER"],
        tags: str,
    ) -> None:
        self.endpoint: Final = endpoint
        self.metric: Final = metric
        self.timestamp: Final = timestamp
        self.step: Final = step
        self.value: Final = value
        self.counter_type: Final = counter_type
        self.tags: Final = tags

    def as_json(self) -> dict[str, object]:
        """The falcon-agent / transfer JSON object (integer step and timestamp)."""
        return {
            "endpoint": self.endpoint,
            "metric": self.metric,
            "timestamp": self.timestamp,
            "step": self.step,
            "value": self.value,
            "counterType": self.counter_type,
            "tags": self.tags,
        }


class PromBatch(Record):
    """One cycle in the Prometheus schema; ``timestamp_ms`` is the cycle's single timestamp (built
    once a cycle, but the generic ``__init__`` is a loop of ``setattr``: its own is a tenth of it)."""

    __slots__ = _fields = ("timestamp_ms", "families")

    def __init__(self, timestamp_ms: int, families: tuple[Family, ...]) -> None:
        self.timestamp_ms: Final = timestamp_ms
        self.families: Final = families

    def sample_count(self) -> int:
        """Series in the batch (``map`` in C: a sink counts every cycle's, some forty families)."""
        return sum(map(len, map(_SERIES_OF, self.families)))


_SERIES_OF = attrgetter("series")


class PromGroup(Record):
    """A batch for one Pushgateway group of its own, e.g. ``job=falcon_gpu_job/namespace/ml/pod/x``:
    ``grouping`` is the group's key as (name, value) pairs, in URL order."""

    grouping: Labels
    batch: PromBatch
