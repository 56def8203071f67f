"""One cycle: collect -> attribute -> health -> hand the rendered cycle to every sink.

Each stage is isolated: an exception in attribution or in one sink is counted
and logged once, and the cycle still reaches the other sinks. One timestamp
is taken per cycle and used for every sample.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from falcon_gpu.health import HealthEvaluator
from falcon_gpu.model.attribution import Attribution
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.snapshot import Snapshot
from falcon_gpu.schemas.render import RenderedCycle
from falcon_gpu.sinks.base import Sink
from falcon_gpu.telemetry import Telemetry

if TYPE_CHECKING:
    from falcon_gpu.jobs.tracker import JobTracker

log = logging.getLogger(__name__)


class Source(Protocol):
    def collect(self, timestamp: float) -> Snapshot: ...


class Attributing(Protocol):
    def attribute(self, snapshot: Snapshot) -> Attribution: ...


class CycleRunner:
    def __init__(
        self,
        *,
        node: str,
        step: int,
        source: Source,
        attributor: Attributing | None,
        sinks: Sequence[Sink],
        telemetry: Telemetry,
        schema: Literal["falcon_gpu", "dcgm"] = "falcon_gpu",
        process_metrics: bool = False,
        clock: Callable[[], float] = time.time,
        jobs: JobTracker | None = None,
    ) -> None:
        self.node, self.step = node, step
        self.source, self.attributor, self.sinks = source, attributor, list(sinks)
        self.telemetry, self.schema, self.process_metrics = telemetry, schema, process_metrics
        self.health = HealthEvaluator()
        self._clock = clock
        self.jobs = jobs

    def run(self) -> RenderedCycle:
        """One whole cycle; returns what was rendered (for tests and the plugin)."""
        started = time.perf_counter()
        snapshot = self.source.collect(self._clock())
        attribution = Attribution()
        if self.attributor is not None and snapshot.nvml_ok:
            try:
                attribution = self.attributor.attribute(snapshot)
            except Exception as exc:  # a bug in attribution must not cost the device metrics
                self.telemetry.failing("attribution", "attribution", f"attribution failed: {exc!r}")
                log.debug("attribution failure", exc_info=True)
            else:
                self.telemetry.recovered("attribution", "attribution works again")
        health = self.health.evaluate(snapshot)
        jobs = self.jobs.observe(snapshot, attribution, health) if self.jobs is not None else None
        cycle = CycleData(
            node=self.node,
            step=self.step,
            snapshot=snapshot,
            attribution=attribution,
            health=health,
            telemetry=self.telemetry.view(),
            process_metrics=self.process_metrics,
            jobs_finished=jobs.finished if jobs else (),
            job_groups=jobs.groups if jobs else (),
        )
        rendered = RenderedCycle(cycle, self.schema)
        for sink in self.sinks:
            self._guard(f"sink:{sink.name}", lambda s=sink: s.submit(rendered))  # type: ignore[misc]
        self.telemetry.cycle_done(time.perf_counter() - started)
        return rendered

    def _guard(self, key: str, fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception as exc:
            kind = key.split(":", 1)[0]
            self.telemetry.failing(key, kind, f"{key}: unexpected error: {exc!r}")
            log.debug("%s failure", key, exc_info=True)
        else:
            self.telemetry.recovered(key, f"{key}: works again")
