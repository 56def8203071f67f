"""One cycle: collect -> attribute -> health -> hand the rendered cycle to every sink.

Each stage is isolated: an exception in attribution or in one sink is counted
and logged once, and the cycle still reaches the other sinks. One timestamp
is taken per cycle and used for every sample.

The first cycle waits (at most ``first_attribution_wait`` s, before reading the
GPUs so its timestamp stays current) until the attributor's lookups have been
refreshed once: otherwise every start would ship one cycle with every process
unattributed and no pod series, a spike on every dashboard at each rollout.
The labels every series starts with (``node`` and the ``labels`` setting) are
built here once, not per cycle.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from falcon_gpu.health import HealthEvaluator
from falcon_gpu.model.attribution import Attribution
from falcon_gpu.model.cycle import CycleData, HealthReport
from falcon_gpu.model.policy import PolicyStatus
from falcon_gpu.model.samples import Labels
from falcon_gpu.model.snapshot import Snapshot
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.schemas.render import RenderedCycle, Renderers
from falcon_gpu.schemas.selection import EVERYTHING, MetricSelection
from falcon_gpu.sinks.base import Sink

if TYPE_CHECKING:
    from falcon_gpu.advice.book import AdviceBook
    from falcon_gpu.jobs.tracker import JobTracker
    from falcon_gpu.model.advice import Advice
    from falcon_gpu.model.jobs import JobRecord

log = logging.getLogger(__name__)


class Source(Protocol):
    def collect(self, timestamp: float) -> Snapshot: ...


class Attributing(Protocol):
    def attribute(self, snapshot: Snapshot) -> Attribution: ...

    def wait_ready(self, timeout: float) -> bool: ...


class PolicyEvaluating(Protocol):
    def evaluate(
        self,
        snapshot: Snapshot,
        health: dict[str, HealthReport],
        attribution: Attribution,
        *,
        monotonic: float | None = None,
    ) -> tuple[PolicyStatus, ...]: ...


FIRST_ATTRIBUTION_WAIT = 2.0
"""Seconds the first cycle waits for the first attribution (CONTRACT section 3)."""


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
        schema: str = "falcon_gpu",
        sink_schemas: Mapping[str, str] | None = None,
        selection: MetricSelection = EVERYTHING,
        process_metrics: bool = False,
        labels: Labels = (),
        first_attribution_wait: float = FIRST_ATTRIBUTION_WAIT,
        policies: PolicyEvaluating | None = None,
        clock: Callable[[], float] = time.time,
        jobs: JobTracker | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        carbon_intensity: float | None = None,
        advice: AdviceBook | None = None,
    ) -> None:
        """``labels``: the ``labels`` setting (validated), added to every series. ``clock`` gives the
        samples' timestamps; ``monotonic`` what every duration is measured on (job records, throttled
        seconds, a policy's ``for`` and ``hold_down``, the XID hold), so a step of the wall clock
        moves timestamps only. A test that drives ``clock`` drives ``monotonic`` with it.
        ``sink_schemas``: sink name -> the Prometheus schema it asked for, where not ``schema`` (each
        schema is rendered at most once a cycle, only if a sink reads it). ``selection``: ``[metrics]``."""
        self.node, self.step = node, step
        self.labels: Labels = tuple(labels)
        self.node_labels: Labels = (("node", node), *self.labels)
        self._first_wait: float | None = first_attribution_wait
        self.source, self.attributor, self.sinks = source, attributor, list(sinks)
        self._sink_keys: dict[str, tuple[str, str]] = {}
        """Sink name -> its log-once key and recovery message, formatted once, not every cycle."""
        self.telemetry, self.schema, self.process_metrics = telemetry, schema, process_metrics
        self.sink_schemas: Mapping[str, str] = dict(sink_schemas or {})
        self.selection = selection
        self.renderers = Renderers()
        """What the schemas keep from one cycle to the next: this runner's, no other's."""
        self.health = HealthEvaluator()
        self.policies = policies
        self._clock = clock
        self._monotonic = monotonic
        self.jobs = jobs
        self.carbon_intensity = carbon_intensity
        self.advice = advice
        """Right-sizing advice over ``jobs``' records (``run`` only)."""

    def run(self) -> RenderedCycle:
        """One whole cycle; returns what was rendered (for tests and the plugin)."""
        self._await_first_attribution()  # not part of the cycle's own time
        started = time.perf_counter()
        steady = self._monotonic()
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
        health = self.health.evaluate(snapshot, monotonic=steady)
        jobs = self.jobs.observe(snapshot, attribution, health, monotonic=steady) if self.jobs else None
        advice = self._advise(snapshot, jobs.finished if jobs else ())
        cycle = CycleData(
            node=self.node,
            step=self.step,
            snapshot=snapshot,
            attribution=attribution,
            health=health,
            policies=self._evaluate_policies(snapshot, health, attribution, steady),
            telemetry=self.telemetry.view(),
            process_metrics=self.process_metrics,
            node_labels=self.node_labels,
            extra_labels=self.labels,
            jobs_finished=jobs.finished if jobs else (),
            job_groups=jobs.groups if jobs else (),
            carbon_intensity=self.carbon_intensity,
            advice=advice,
        )
        rendered = RenderedCycle(cycle, self.schema, self.selection, self.renderers)
        schemas = self.sink_schemas
        for sink in self.sinks:
            key, again = self._sink_keys.get(sink.name) or self._sink_key(sink.name)
            try:
                sink.submit(rendered.view(schemas.get(sink.name)))
            except Exception as exc:  # one sink's bug must not cost the others their cycle
                self.telemetry.failing(key, "sink", f"{key}: unexpected error: {exc!r}")
                log.debug("%s failure", key, exc_info=True)
            else:
                self.telemetry.recovered(key, again)
        self.telemetry.cycle_done(time.perf_counter() - started)
        return rendered

    def _sink_key(self, name: str) -> tuple[str, str]:
        keys = self._sink_keys[name] = (f"sink:{name}", f"sink:{name}: works again")
        return keys

    def _await_first_attribution(self) -> None:
        wait, self._first_wait = self._first_wait, None
        if wait is None or self.attributor is None:
            return
        if not self.attributor.wait_ready(wait):
            log.info("the first attribution took longer than %gs; the first cycle goes out without it", wait)

    def _advise(self, snapshot: Snapshot, finished: tuple[JobRecord, ...]) -> tuple[Advice, ...]:
        """Right-sizing advice; a bug there costs the advice series, never the cycle."""
        if self.advice is None or self.jobs is None:
            return ()
        profiles = getattr(self.source, "mig_profiles", None)  # the NVML source's; a test's has none
        try:
            advice = self.advice.observe(snapshot, finished, self.jobs.running, profiles)
        except Exception as exc:
            self.telemetry.failing("advice", "jobs", f"right-sizing advice: unexpected error: {exc!r}")
            log.debug("advice failure", exc_info=True)
            return ()
        self.telemetry.recovered("advice", "right-sizing advice works again")
        return advice

    def _evaluate_policies(
        self, snapshot: Snapshot, health: dict[str, HealthReport], attribution: Attribution, steady: float
    ) -> tuple[PolicyStatus, ...]:
        if self.policies is None:
            return ()
        try:
            statuses = self.policies.evaluate(snapshot, health, attribution, monotonic=steady)
        except Exception as exc:  # a bug in a policy must not cost the cycle
            self.telemetry.failing("policies", "policy", f"policy evaluation failed: {exc!r}")
            log.debug("policy failure", exc_info=True)
            return ()
        self.telemetry.recovered("policies", "policy evaluation works again")
        return statuses
