"""Collects series into families in a fixed metric order, from a table of specs."""

from __future__ import annotations

from dataclasses import dataclass

from falcon_gpu.model.samples import Family, Labels, MetricKind, Series


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    kind: MetricKind
    help: str


class FamilyBuilder:
    """Series added under a spec's name come out grouped, in the specs' order.

    Duplicate label sets within one metric are a bug upstream; Prometheus would
    reject the whole remote-write request, so the last value wins here instead.
    """

    def __init__(self, specs: tuple[MetricSpec, ...]) -> None:
        self._specs = specs
        self._series: dict[str, dict[Labels, float]] = {s.name: {} for s in specs}

    def add(self, name: str, labels: Labels, value: float | int | bool | None) -> None:
        """Add one series; ``None`` (a reading that is absent) adds nothing."""
        if value is None:
            return
        self._series[name][labels] = float(value)

    def families(self) -> tuple[Family, ...]:
        return tuple(
            Family(s.name, s.kind, s.help, tuple(Series(lb, v) for lb, v in self._series[s.name].items()))
            for s in self._specs
            if self._series[s.name]
        )
