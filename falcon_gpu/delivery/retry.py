"""The retry stage: the only place that loops and sleeps on a failed push.

tenacity drives the loop. Delay: exponential from ``initial`` (tens of
milliseconds) doubling up to ``cap``, with equal jitter (half of each step random)
so many agents restarted together do not hammer a recovering server in step; a server's ``Retry-After``
is honoured (waited at least that long, up to :data:`MAX_RETRY_AFTER`).
Retryable failures are retried until the push succeeds or the sink stops, since
the batch is safe in the spool meanwhile; a :class:`PermanentError` ends the
loop at once.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import tenacity

from falcon_gpu.delivery.outcome import Ack, RetryableError

MAX_RETRY_AFTER = 600.0


class Interrupted(Exception):
    """The sink is stopping, or a newer state replaced this one: the push was abandoned
    (a spooled batch stays in the spool and is sent after the next start)."""


def _retry_after_wait(initial: float, cap: float) -> Callable[[tenacity.RetryCallState], float]:
    backoff = tenacity.wait_exponential(multiplier=initial, max=cap)

    def wait(state: tenacity.RetryCallState) -> float:
        base = float(backoff(state))
        # "equal jitter": half the step fixed, half random, so a fleet restarted together
        # spreads over seconds at the cap instead of milliseconds, and no retry is near 0
        delay = base / 2 + random.uniform(0, base / 2)
        err = state.outcome.exception() if state.outcome else None
        if isinstance(err, RetryableError) and err.retry_after is not None:
            delay = max(delay, min(err.retry_after, MAX_RETRY_AFTER))
        return delay

    return wait


def push_with_retry(
    push: Callable[[], Ack],
    *,
    initial: float,
    cap: float,
    stop: threading.Event,
    on_failure: Callable[[RetryableError, int, float], None],
    abandon: Callable[[], bool] = lambda: False,
) -> Ack:
    """Call ``push`` until it returns. ``on_failure(error, attempt, next_delay)`` runs after
    each retryable failure. Raises PermanentError from ``push`` unchanged, and
    Interrupted when ``stop`` is set or ``abandon()`` turns true while waiting."""
    wait = _retry_after_wait(initial, cap)

    def sleep(delay: float) -> None:
        if stop.wait(delay) or abandon():
            raise Interrupted("stopped while waiting to retry")

    def before_sleep(state: tenacity.RetryCallState) -> None:
        err = state.outcome.exception() if state.outcome else None
        assert isinstance(err, RetryableError)
        on_failure(err, state.attempt_number, state.upcoming_sleep)

    def stopping(state: tenacity.RetryCallState) -> bool:
        return stop.is_set() or abandon()

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(RetryableError),
        wait=wait,
        stop=stopping,
        sleep=sleep,
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        return retrying(push)
    except RetryableError as exc:  # stop was set right after a failed attempt
        raise Interrupted(str(exc)) from None
