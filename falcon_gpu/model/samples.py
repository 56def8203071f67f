"""What schemas produce and sinks consume: named, labelled values with no wire format.

Two families exist because the two worlds disagree on shape: Prometheus metric
families (name, type, help, labelled series) and Open-Falcon items
(endpoint/metric/tags/step/counterType). Both are immutable ``msgspec.Struct`` values (defined
in C: nothing compiled at import, about 80 ns to build one; ``docs/BENCHMARKS.md``, "Value classes").
"""

from __future__ import annotations

from operator import attrgetter
from typing import Literal

import msgspec

MetricKind = Literal["gauge", "counter"]
Labels = tuple[tuple[str, str], ...]


class Series(msgspec.Struct, frozen=True, gc=False):
    """One labelled value (thousands are built a cycle)."""

    labels: Labels
    value: float


class Family(msgspec.Struct, frozen=True, gc=False):
    """A Prometheus metric family: every series of one metric name in one cycle."""

    name: str
    kind: MetricKind
    help: str
    series: tuple[Series, ...]


class FalconItem(msgspec.Struct, frozen=True, gc=False):
    """One Open-Falcon data point, exactly the fields of falcon-agent's push API."""

    endpoint: str
    metric: str
    timestamp: int
    step: int
    value: float
    counter_type: Literal["GAUGE", "COUNTER"]
    tags: str

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


class PromBatch(msgspec.Struct, frozen=True, gc=False):
    """One cycle in the Prometheus schema; ``timestamp_ms`` is the cycle's single timestamp."""

    timestamp_ms: int
    families: tuple[Family, ...]

    def sample_count(self) -> int:
        """Series in the batch (``map`` in C: a sink counts every cycle's, some forty families)."""
        return sum(map(len, map(_SERIES_OF, self.families)))


_SERIES_OF = attrgetter("series")


class PromGroup(msgspec.Struct, frozen=True, gc=False):
    """A batch for one Pushgateway group of its own, e.g. ``job=falcon_gpu_job/namespace/ml/pod/x``:
    ``grouping`` is the group's key as (name, value) pairs, in URL order."""

    grouping: Labels
    batch: PromBatch
