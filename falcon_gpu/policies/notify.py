"""Deliver policy alerts to Alertmanager (API v2) and to JSON webhooks.

One sender thread per destination URL, so one receiver that is down delays no
other. Each holds the *current* state of its alerts, never a queue of old
messages: a post that failed is retried (the sinks' retry stage, tenacity with
equal jitter, honouring Retry-After) with whatever the state is by then, so an
alert that cleared while the receiver was down is sent as resolved, never as
firing. There is no spool: an alert replayed hours later would page someone for
a GPU that is fine now.

Alertmanager: every firing alert is re-posted every ``resend`` seconds with
``endsAt`` a few resends ahead, so Alertmanager does not time it out while the
condition holds (as Prometheus does); a resolution is posted once with
``endsAt`` = when it cleared. Webhook: one JSON POST per transition (fired,
resolved), the newest transition of an alert replacing one not yet delivered.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone

from falcon_gpu.delivery.http import HttpTransport, classify
from falcon_gpu.delivery.outcome import Ack, PermanentError, RetryableError
from falcon_gpu.delivery.retry import Interrupted, push_with_retry
from falcon_gpu.delivery.secrets import redact_url
from falcon_gpu.delivery.settings import PlainHttp
from falcon_gpu.delivery.state import DeliveryState
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.policies.engine import Alert

log = logging.getLogger("falcon_gpu.policies")

RESEND_S = 30.0
TIMEOUT_S = 10.0
RETRY_INITIAL_S, RETRY_MAX_S = 0.5, 30.0


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def alertmanager_body(alerts: Iterable[Alert], now: float, resend: float) -> list[dict[str, object]]:
    """``POST /api/v2/alerts`` body: firing alerts end a few resends from now unless re-posted."""
    return [
        {
            "labels": dict(a.labels),
            "annotations": {"summary": a.summary},
            "startsAt": iso(a.starts_at),
            "endsAt": iso(a.ends_at if a.ends_at is not None else now + 4 * resend),
        }
        for a in alerts
    ]


def webhook_body(alert: Alert) -> dict[str, object]:
    body: dict[str, object] = {
        "status": "firing" if alert.ends_at is None else "resolved",
        "policy": alert.policy.name,
        "labels": dict(alert.labels),
        "summary": alert.summary,
        "startsAt": iso(alert.starts_at),
    }
    if alert.ends_at is not None:
        body["endsAt"] = iso(alert.ends_at)
    return body


class _Destination:
    """One receiver URL: a sender thread posting the current state of its alerts."""

    def __init__(self, url: str, kind: str, telemetry: Telemetry, resend: float) -> None:
        self.url, self.kind = url, kind
        self._shown = redact_url(url)
        self._telemetry = telemetry
        self._resend = resend
        self._key = f"policy:{kind}:{self._shown}"
        self._state = DeliveryState()  # decides whether close waits (never the log key)
        self._transport = HttpTransport(PlainHttp(timeout=TIMEOUT_S), sink=f"policy-{kind}")
        self._cond = threading.Condition()
        self._alerts: dict[tuple[str, str], Alert] = {}
        """Alertmanager: every firing alert and every resolution not yet posted. Webhook:
        transitions not yet posted."""
        self._generation = 0
        self._sent_gen = 0
        """The generation last delivered (or refused for good)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"falcon-gpu-{kind}", daemon=True)
        self._thread.start()

    def update(self, alert: Alert) -> None:
        with self._cond:
            self._alerts[alert.key] = alert
            self._generation += 1
            self._cond.notify_all()

    def pending(self) -> int:
        with self._cond:
            return len(self._alerts)

    def close(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:  # give resolutions and new firings their chance, unless the receiver is down
            while self._unsent() and not self._state.server_down:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(0.1, left))
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(max(0.1, deadline - time.monotonic()))
        self._transport.close()

    def _unsent(self) -> bool:
        if self.kind == "webhook":
            return bool(self._alerts)
        return any(a.ends_at is not None for a in self._alerts.values()) or self._generation != self._sent_gen

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                self._cond.wait_for(
                    lambda: self._stop.is_set() or self._generation != self._sent_gen, timeout=self._resend
                )
                if self._stop.is_set():
                    return
                generation, alerts = self._generation, list(self._alerts.values())
            if not alerts:
                self._sent_gen = generation
                continue
            if self._post(alerts, generation):
                with self._cond:
                    self._sent_gen = generation
                    for a in alerts:  # delivered: resolutions (and webhook transitions) are done
                        if (a.ends_at is not None or self.kind == "webhook") and self._alerts.get(a.key) is a:
                            del self._alerts[a.key]
                    self._cond.notify_all()

    def _post(self, alerts: list[Alert], generation: int) -> bool:
        """Post ``alerts``; False when abandoned (a newer state, or stopping) or refused."""

        def push() -> Ack:
            bodies: list[object]
            if self.kind == "alertmanager":
                bodies = [alertmanager_body(alerts, time.time(), self._resend)]
            else:
                bodies = [webhook_body(a) for a in alerts]
            for body in bodies:
                data = json.dumps(body).encode()
                headers = {"Content-Type": "application/json"}
                classify(self._transport.request("POST", self.url, data, headers), self.url)
            return Ack()

        def on_failure(err: RetryableError, attempt: int, delay: float) -> None:
            self._state.attempt_failed()
            self._telemetry.failing(self._key, "policy_notify", f"{self.kind} {err}; retrying")

        def superseded() -> bool:
            with self._cond:
                return self._generation != generation

        try:
            push_with_retry(push, initial=RETRY_INITIAL_S, cap=RETRY_MAX_S, stop=self._stop,
                            on_failure=on_failure, abandon=superseded)  # fmt: skip
        except Interrupted:
            return False
        except PermanentError as exc:
            self._telemetry.failing(
                f"{self._key}:refused", "policy_notify", f"{self.kind} refused alerts: {exc}"
            )
            with self._cond:  # refused for good: retrying the same body cannot help
                self._sent_gen = generation
                for a in alerts:
                    if a.ends_at is not None and self._alerts.get(a.key) is a:
                        del self._alerts[a.key]
            return False
        self._state.acknowledged()
        self._telemetry.recovered(self._key, f"{self.kind} {self._shown} takes alerts again")
        self._telemetry.recovered(f"{self._key}:refused", f"{self.kind} {self._shown} accepts alerts again")
        return True


class AlertNotifier:
    """Routes each alert to the destinations its policy names (implements engine.Notifier)."""

    def __init__(self, telemetry: Telemetry, *, resend: float = RESEND_S) -> None:
        self._telemetry = telemetry
        self._resend = resend
        self._dest: dict[tuple[str, str], _Destination] = {}

    def _get(self, url: str, kind: str) -> _Destination:
        d = self._dest.get((kind, url))
        if d is None:
            d = self._dest[(kind, url)] = _Destination(url, kind, self._telemetry, self._resend)
        return d

    def update(self, alert: Alert) -> None:
        for base in alert.policy.alertmanager:
            self._get(base + "/api/v2/alerts", "alertmanager").update(alert)
        if alert.policy.webhook:
            self._get(alert.policy.webhook, "webhook").update(alert)

    def close(self, timeout: float) -> None:
        _all(self._dest.values(), lambda d: d.close(timeout))


def _all(items: Iterable[_Destination], fn: Callable[[_Destination], None]) -> None:
    threads = [threading.Thread(target=fn, args=(d,), daemon=True) for d in items]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
