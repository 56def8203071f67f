"""The one stage that pushes, retries and counts, shared by both delivery paths.

:meth:`Settler.settle` pushes one batch (queued path) or one state (latest-state
path) until it is settled, and is the only place that turns an outcome into
telemetry: ``sent`` on acknowledgement (less the items refused one by one,
which are ``dropped``), ``dropped`` for a permanent refusal or a bug in the
pusher, and a ``spooled`` count at the first failed attempt (through the
caller's ``first_failure``: only it knows whether that batch was counted
already). It also keeps :class:`~.state.DeliveryState` ``server_down_since``,
which the paths read to decide how long a shutdown waits.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from falcon_gpu.delivery.outcome import Ack, PermanentError, RetryableError
from falcon_gpu.delivery.retry import Interrupted, push_with_retry
from falcon_gpu.delivery.settings import RetrySettings
from falcon_gpu.delivery.state import DeliveryState
from falcon_gpu.model.telemetry import Telemetry


class Settled(Enum):
    DELIVERED = "delivered"  # acknowledged (some items may have been refused one by one)
    REFUSED = "refused"  # dropped for good
    INTERRUPTED = "interrupted"  # the sink is stopping, or a newer state replaced this one


@dataclass(frozen=True, slots=True)
class Wording:
    """What the path's log lines call the thing in flight; built once per path."""

    retrying: str  # after "sink <name>: <error>; "
    refused: str  # "server refused <this>, dropped it"; ``{samples}`` is filled in
    accepted_again: str


@dataclass(frozen=True, slots=True)
class Result:
    settled: Settled
    retried: bool  # at least one attempt failed


def _never() -> bool:
    return False


class Settler:
    """One per sink; used from that sink's sender thread only."""

    def __init__(
        self,
        settings: RetrySettings,
        *,
        telemetry: Telemetry,
        state: DeliveryState,
        stop: threading.Event,
        wording: Wording,
    ) -> None:
        self.name = settings.name
        self._cfg = settings
        self._telemetry = telemetry
        self._state = state
        self._stop = stop
        self._key = f"delivery:{self.name}"  # "sink:<name>" is the cycle's key for submit()
        self._refused_what = wording.refused
        self._retrying = f"; {wording.retrying}"
        self._rejected_key = f"{self._key}:rejected"
        self._again = f"sink {self.name}: delivering again"  # formatted once: not per success
        self._accepted_again = f"sink {self.name}: {wording.accepted_again}"

    def settle(
        self,
        push: Callable[[], Ack],
        samples: int,
        *,
        first_failure: Callable[[], None],
        abandon: Callable[[], bool] = _never,
    ) -> Result:
        """Push until acknowledged, refused for good, or interrupted (``abandon()`` turned
        true, or the stop event is set); count the outcome. ``first_failure`` runs once, at
        the first failed attempt."""
        failed = False

        def on_failure(err: RetryableError, attempt: int, delay: float) -> None:
            nonlocal failed
            if not failed:
                failed = True
                first_failure()
            self._state.attempt_failed()
            self._telemetry.failing(self._key, "sink", f"sink {self.name}: {err}{self._retrying}")

        try:
            ack = push_with_retry(
                push,
                initial=self._cfg.retry_initial_delay,
                cap=self._cfg.retry_max_delay,
                stop=self._stop,
                on_failure=on_failure,
                abandon=abandon,
            )
        except Interrupted:
            return Result(Settled.INTERRUPTED, failed)
        except PermanentError as exc:
            what = self._refused_what.format(samples=samples)
            self._refused(samples, f"server refused {what}, dropped it: {exc}")
            return Result(Settled.REFUSED, failed)
        except Exception as exc:  # a bug in push: drop rather than loop forever or kill the sender
            self._refused(samples, f"push failed unexpectedly, dropped: {exc!r}", logging.ERROR)
            return Result(Settled.REFUSED, failed)
        self._telemetry.samples(self.name, "sent", samples - ack.rejected)
        if ack.rejected:
            self._telemetry.samples(self.name, "dropped", ack.rejected)
        self._state.acknowledged()
        self._telemetry.recovered(self._key, self._again)
        self._telemetry.recovered(self._rejected_key, self._accepted_again)
        return Result(Settled.DELIVERED, failed)

    def _refused(self, samples: int, message: str, level: int = logging.WARNING) -> None:
        self._telemetry.samples(self.name, "dropped", samples)
        self._telemetry.failing(
            self._rejected_key, "sink_rejected", f"sink {self.name}: {message}", level=level
        )
