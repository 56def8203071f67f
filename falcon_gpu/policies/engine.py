"""Policy evaluation: per policy and GPU, a small state machine run once per cycle.

States: *clear* → (condition holds) → *pending* → (held for ``for`` seconds) →
*firing* → (condition clear for ``hold_down`` seconds) → *clear*. Edge-triggered:
one violation is counted, and one alert raised, per firing, however long it
lasts; while firing, a condition that comes back before ``hold_down`` ran out
is the same violation, so a flapping sensor fires once instead of flooding.

The engine knows nothing of wires: it hands each firing and each resolution to
its notifiers (Alertmanager, webhook), which deliver off the cycle's thread.
State is bounded by policies times GPUs ever seen.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from falcon_gpu.model.attribution import Attribution
from falcon_gpu.model.cycle import HealthReport
from falcon_gpu.model.policy import PolicyStatus
from falcon_gpu.model.snapshot import DeviceReading, Snapshot
from falcon_gpu.policies.conditions import ReplayHistory, Verdict, check
from falcon_gpu.policies.config import PolicyConfig

log = logging.getLogger("falcon_gpu.policies")


@dataclass(frozen=True, slots=True)
class Alert:
    """One violation, from its start to its resolution (``ends_at``)."""

    policy: PolicyConfig
    labels: tuple[tuple[str, str], ...]
    """Fixed when it fires: Alertmanager tells alerts apart by their labels."""
    summary: str
    starts_at: float
    ends_at: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.policy.name, dict(self.labels)["uuid"])


class Notifier(Protocol):
    def update(self, alert: Alert) -> None:
        """A violation fired (``ends_at`` None) or resolved. Must not block."""

    def close(self, timeout: float) -> None: ...


@dataclass
class _Track:
    pending_since: float | None = None
    clear_since: float | None = None
    alert: Alert | None = None
    violations: int = 0


@dataclass
class _Gpu:
    replays: ReplayHistory = field(default_factory=ReplayHistory)


class PolicyEngine:
    def __init__(
        self,
        policies: Sequence[PolicyConfig],
        *,
        node: str,
        extra_labels: tuple[tuple[str, str], ...] = (),
        notifiers: Sequence[Notifier] = (),
    ) -> None:
        self._policies = tuple(policies)
        self._node = node
        self._extra = extra_labels
        self._notifiers = tuple(notifiers)
        self._tracks: dict[tuple[str, str], _Track] = {}
        self._gpus: dict[str, _Gpu] = {}
        self._watching: dict[tuple[str, str], bool] = {}

    def evaluate(
        self,
        snapshot: Snapshot,
        health: dict[str, HealthReport],
        attribution: Attribution,
        *,
        monotonic: float | None = None,
    ) -> tuple[PolicyStatus, ...]:
        """``monotonic``: the monotonic clock at the snapshot. ``for``, ``hold_down`` and replay rates
        are measured on it (a step of the wall clock must neither fire nor resolve an alert); the
        alerts' ``startsAt``/``endsAt`` are wall-clock times. None: the snapshot's timestamp (a replay)."""
        if not self._policies:
            return ()
        now = snapshot.timestamp
        steady = now if monotonic is None else monotonic
        out: list[PolicyStatus] = []
        for dev in snapshot.devices:
            gpu = self._gpus.setdefault(dev.uuid, _Gpu())
            gpu.replays.update(dev.pcie_replays if dev.up else None, steady)
            for policy in self._policies:
                if not self._watches(policy, dev):
                    continue
                verdict = check(policy, dev, health.get(dev.uuid), gpu.replays)
                track = self._tracks.setdefault((policy.name, dev.uuid), _Track())
                self._step(policy, track, verdict, dev, attribution, (now, steady))
                out.append(PolicyStatus(policy.name, dev.uuid, track.alert is not None, track.violations))
        return tuple(out)

    def _watches(self, policy: PolicyConfig, dev: DeviceReading) -> bool:
        """``policy.watches`` once per policy and GPU (model globs are not matched every cycle)."""
        key = (policy.name, dev.uuid)
        known = self._watching.get(key)
        if known is None:
            known = self._watching[key] = policy.watches(dev.index, dev.uuid, dev.name)
        return known

    def _step(
        self,
        policy: PolicyConfig,
        track: _Track,
        verdict: Verdict,
        dev: DeviceReading,
        attribution: Attribution,
        at: tuple[float, float],
    ) -> None:
        """``at``: (wall clock, monotonic clock) of this cycle; the track's times are monotonic."""
        now, steady = at
        if verdict.holds:
            track.clear_since = None
            if track.alert is None:
                if track.pending_since is None:
                    track.pending_since = steady
                if steady - track.pending_since >= policy.for_:
                    track.violations += 1
                    since = now - (steady - track.pending_since)  # when it began, on the wall clock
                    track.alert = self._fire(policy, verdict, dev, attribution, since, now)
            return
        track.pending_since = None
        if track.alert is None:
            return
        if track.clear_since is None:
            track.clear_since = steady
        if steady - track.clear_since >= policy.hold_down:
            resolved = Alert(track.alert.policy, track.alert.labels, track.alert.summary,
                             track.alert.starts_at, ends_at=now)  # fmt: skip
            track.alert = None
            log.info("policy %s resolved on GPU %s (%s)", policy.name, dev.index, dev.uuid)
            self._notify(resolved)

    def _fire(
        self,
        policy: PolicyConfig,
        verdict: Verdict,
        dev: DeviceReading,
        attribution: Attribution,
        since: float,
        now: float,
    ) -> Alert:
        labels: list[tuple[str, str]] = [
            ("alertname", policy.name),
            ("policy", policy.name),
            ("severity", policy.severity),
            ("node", self._node),
            ("gpu", str(dev.index)),
            ("uuid", dev.uuid),
            ("model", dev.name),
            *self._extra,
        ]
        pods = sorted({(u.container.namespace, u.container.pod) for u in attribution.pods
                       if u.gpu_uuid == dev.uuid})  # fmt: skip
        if len(pods) == 1:  # several pods cannot share one label: they go in the summary
            labels += [("namespace", pods[0][0]), ("pod", pods[0][1])]
        summary = _summary(policy, verdict, dev, pods)
        alert = Alert(policy, tuple(labels), summary, starts_at=since)
        log.warning("policy %s violated: %s", policy.name, summary)
        self._notify(alert)
        return alert

    def _notify(self, alert: Alert) -> None:
        for n in self._notifiers:
            n.update(alert)

    def close(self, timeout: float) -> None:
        for n in self._notifiers:
            n.close(timeout)


def _summary(policy: PolicyConfig, verdict: Verdict, dev: DeviceReading, pods: list[tuple[str, str]]) -> str:
    what = policy.condition.replace("_", " ")
    value = "" if verdict.value is None else f" ({verdict.value:g})"
    detail = f": {verdict.detail}" if verdict.detail else ""
    on = f"GPU {dev.index} ({dev.name}, {dev.uuid})"
    used_by = f"; used by {', '.join(f'{ns}/{p}' for ns, p in pods)}" if pods else ""
    return f"{what}{value}{detail} on {on}{used_by}"
