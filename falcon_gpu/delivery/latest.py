"""Latest-state delivery (Pushgateway): only the newest cycle matters, never a backlog.

A Pushgateway group holds one state; replaying old cycles would only make it
flicker through the past. So this keeps a single slot: ``submit`` replaces
whatever is waiting, and the sender thread pushes the newest state with the
shared retry stage. When a newer state arrives while a push is waiting to be
retried, the old one is abandoned and the newer one sent instead. No spool:
after a crash the next cycle is a complete, fresher state anyway.

Telemetry: ``sent`` on success, ``spooled`` once for a state whose first
attempt failed (it waits), ``dropped`` for a permanent refusal. A state that is
replaced by a newer one before it could be delivered is not counted: it was
never meant to be delivered once superseded.
"""

from __future__ import annotations

import abc
import logging
import threading
import time
from typing import Generic, TypeVar

from falcon_gpu.delivery.outcome import Ack, PermanentError, RetryableError
from falcon_gpu.delivery.retry import Interrupted, push_with_retry
from falcon_gpu.sinks.base import Rendered, Sink
from falcon_gpu.sinks.config import NetworkSinkConfig
from falcon_gpu.telemetry import Telemetry

S = TypeVar("S")


class LatestSink(Sink, Generic[S]):
    def __init__(self, config: NetworkSinkConfig, *, telemetry: Telemetry) -> None:
        self.name = config.name
        self._cfg = config
        self._telemetry = telemetry
        self._key = f"delivery:{self.name}"  # "sink:<name>" is the cycle's key for submit()
        telemetry.register_sink(self.name)
        self._cond = threading.Condition()
        self._slot: tuple[S, int] | None = None
        self._generation = 0
        self._busy = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    @abc.abstractmethod
    def state(self, rendered: Rendered) -> tuple[S, int]:
        """The cycle's state and its sample count (cheap: encoding happens in the sender)."""

    @abc.abstractmethod
    def push(self, state: S) -> Ack:
        """Send one state. Raises RetryableError or PermanentError."""

    def on_close(self, timeout: float) -> None:
        """Runs once at close after the last push (e.g. delete the group)."""

    def submit(self, rendered: Rendered) -> None:
        if self._closed:
            return
        state = self.state(rendered)
        with self._cond:
            self._slot = state
            self._generation += 1
            self._cond.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name=f"falcon-gpu-{self.name}-sender", daemon=True
                )
                self._thread.start()

    def flush(self, timeout: float) -> bool:
        """Wait until the newest state was delivered (or refused); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._slot is None and not self._busy, timeout)

    def close(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the newest state unless the server is failing, then stop."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout
        with self._cond:  # deliver the last state unless the server is failing
            while (self._slot is not None or self._busy) and not self._telemetry.is_failing(self._key):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.1))
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(max(0.1, deadline - time.monotonic()))
        self.on_close(max(0.1, deadline - time.monotonic()))

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._slot is not None or self._stop.is_set())
                if self._stop.is_set():
                    return
                assert self._slot is not None
                (state, samples), generation = self._slot, self._generation
                self._slot, self._busy = None, True
            try:
                self._deliver(state, samples, generation)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _deliver(self, state: S, samples: int, generation: int) -> None:
        failed = False

        def on_failure(err: RetryableError, attempt: int, delay: float) -> None:
            nonlocal failed
            if not failed:
                failed = True
                self._telemetry.samples(self.name, "spooled", samples)
            self._telemetry.failing(self._key, "sink", f"sink {self.name}: {err}; retrying the newest state")

        def superseded() -> bool:
            with self._cond:
                return self._generation != generation

        try:
            ack = push_with_retry(
                lambda: self.push(state),
                initial=self._cfg.retry_initial_delay,
                cap=self._cfg.retry_max_delay,
                stop=self._stop,
                on_failure=on_failure,
                abandon=superseded,
            )
        except Interrupted:
            return
        except PermanentError as exc:
            self._telemetry.samples(self.name, "dropped", samples)
            self._telemetry.failing(
                f"{self._key}:rejected",
                "sink_rejected",
                f"sink {self.name}: server refused the state, dropped it: {exc}",
            )
            return
        except Exception as exc:  # a bug in push must not kill the sender
            self._telemetry.samples(self.name, "dropped", samples)
            self._telemetry.failing(
                f"{self._key}:rejected",
                "sink_rejected",
                f"sink {self.name}: push failed unexpectedly: {exc!r}",
                level=logging.ERROR,
            )
            return
        self._telemetry.samples(self.name, "sent", samples - ack.rejected)
        self._telemetry.recovered(self._key, f"sink {self.name}: delivering again")
        self._telemetry.recovered(f"{self._key}:rejected", f"sink {self.name}: states accepted again")
