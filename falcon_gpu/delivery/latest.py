"""Latest-state delivery (Pushgateway): only the newest cycle matters, never a backlog.

A Pushgateway group holds one state; replaying old cycles would only make it
flicker through the past. So this keeps a single slot: ``submit`` replaces
whatever is waiting, and the sender thread pushes the newest state through the
shared counting stage (:mod:`.settle`). When a newer state arrives while a
push is waiting to be retried, the old one is abandoned and the newer one sent
instead. No spool: after a crash the next cycle is a complete, fresher state
anyway. A sink supplies a :class:`~.pusher.StatePusher`.

Telemetry: ``sent`` on success, ``spooled`` once for a state whose first
attempt failed (it waits), ``dropped`` for a permanent refusal. A state that is
replaced by a newer one before it could be delivered is not counted: it was
never meant to be delivered once superseded. ``close`` waits for the newest
state unless :class:`~.state.DeliveryState` says the server is down.
"""

from __future__ import annotations

import threading
import time
from typing import Generic, TypeVar

from falcon_gpu.delivery.pusher import StatePusher
from falcon_gpu.delivery.settings import RetrySettings
from falcon_gpu.delivery.settle import Settled, Settler, Wording
from falcon_gpu.delivery.state import DeliveryState
from falcon_gpu.model.telemetry import Telemetry

R = TypeVar("R")
S = TypeVar("S")

WORDING = Wording(
    retrying="retrying the newest state", refused="the state", accepted_again="states accepted again"
)


class LatestDelivery(Generic[R, S]):
    """Implements :class:`falcon_gpu.sinks.base.Sink` around ``sink``."""

    def __init__(self, config: RetrySettings, sink: StatePusher[R, S], *, telemetry: Telemetry) -> None:
        self.name = config.name
        self.sink = sink
        self.state = DeliveryState()
        self._telemetry = telemetry
        telemetry.register_sink(self.name)
        self._cond = threading.Condition()
        self._slot: tuple[S, int] | None = None
        self._generation = 0
        self._delivered = 0  # the generation last acknowledged, or refused for good
        self._busy = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._settler = Settler(
            config, telemetry=telemetry, state=self.state, stop=self._stop, wording=WORDING
        )

    def submit(self, rendered: R) -> None:
        if self._closed:
            return
        state = self.sink.state(rendered)
        with self._cond:
            self._slot = state
            self._generation += 1
            self._cond.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name=f"falcon-gpu-{self.name}-sender", daemon=True
                )
                self._thread.start()

    def check(self) -> tuple[bool, str]:
        return self.sink.check()

    def undelivered(self) -> str | None:
        """The newest state submitted was neither acknowledged nor refused (a refusal is counted
        as ``dropped`` and reported as such)."""
        with self._cond:
            if self._generation == self._delivered:
                return None
        return "the newest state was not delivered (server unreachable or failing); it is not kept"

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
            while (self._slot is not None or self._busy) and not self.state.server_down:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.1))
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(max(0.1, deadline - time.monotonic()))
        self.sink.close(max(0.1, deadline - time.monotonic()))

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
        def first_failure() -> None:
            self._telemetry.samples(self.name, "spooled", samples)

        def superseded() -> bool:
            with self._cond:
                return self._generation != generation

        result = self._settler.settle(
            lambda: self.sink.push(state), samples, first_failure=first_failure, abandon=superseded
        )
        if result.settled is not Settled.INTERRUPTED:
            with self._cond:
                self._delivered = max(self._delivered, generation)
