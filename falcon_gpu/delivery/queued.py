"""Durable delivery for one sink: a batcher and a sender thread around its spool.

::

    submit() ─► memory queue ─► batcher ─► spool (write-ahead) ─► sender ─► push()
    (cycle)      (bounded)       count/age   segment files         retry + backoff

- ``submit`` only explodes the cycle into items and enqueues them: it never
  blocks on the network, and a dead server never slows the cycle or another
  sink (each sink has its own threads).
- The batcher cuts a batch at ``batch_max_samples`` items or when the oldest
  pending item is ``batch_max_age`` seconds old, encodes it once and appends it
  to the spool *before* any attempt, so a crash at any point loses at most what
  was still in the memory queue.
- The sender takes batches from the spool strictly oldest first (one in
  flight: per-series order holds across a backlog) and pushes through the
  shared stage (:mod:`.settle`: retry, backoff, counting); a batch leaves the
  spool only when the server confirmed it or refused it for good.

Telemetry: ``sent`` on confirmation; ``spooled`` once per batch that could not
go out at once and waits in the spool: its first attempt failed, or it was
spooled while the server was failing (so an hour-long outage counts an hour of
samples, not just the first batch); ``dropped`` for a permanent refusal, items
the server rejected one by one, a full memory queue, or the spool cap.

When the spool cannot be written (disk full, I/O error, a read-only disk),
batches are not dropped: they wait in a bounded memory lane
(``queue_max_batches`` batches) and are sent after everything already spooled,
so order still holds; new batches keep going to that lane until it is empty,
then to the spool again. They are not durable meanwhile, which is logged once.
When the spool cannot even be opened or read, the sender goes on with the memory
lane (what the spool holds waits until it can be read); that is logged once
too, under its own key, so neither failure hides the other. A spool locked by
another process (:class:`SpoolBusy`) is not such a failure: two agents must
not both send the same node's series, so those batches are dropped.

Shutdown order (``close``): stop taking submissions, write every pending item to
the spool (or the memory lane), then the pusher's ``closing`` items (staleness
markers), let the sender drain until the timeout unless the server is failing
(``DeliveryState.server_down``), then stop it; what is left stays in the spool for the
next start, and only what the memory lane still holds then is lost (counted).

A sink is composed with this, not derived from it: it supplies a
:class:`~.pusher.BatchPusher` (``explode``, ``encode``, ``push``, ``closing``,
``check``, ``close``). Whether the server is failing and whether the spool
can be written is :class:`~.state.DeliveryState`, kept here and by the shared
counting stage (:mod:`.settle`); the telemetry's keys only log.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from pathlib import Path
from typing import Generic, TypeVar

from falcon_gpu.delivery.memory_lane import MemoryEntry, MemoryLane
from falcon_gpu.delivery.progress import ReplayProgress
from falcon_gpu.delivery.pusher import BatchPusher
from falcon_gpu.delivery.settings import QueueSettings
from falcon_gpu.delivery.settle import Settled, Settler, Wording
from falcon_gpu.delivery.spool import Entry, Spool, SpoolBusy
from falcon_gpu.delivery.spool_reader import Unreadable
from falcon_gpu.delivery.state import DeliveryState
from falcon_gpu.model.telemetry import Telemetry

log = logging.getLogger("falcon_gpu.delivery")
R = TypeVar("R")
T = TypeVar("T")

WORDING = Wording(
    retrying="retrying, batches wait in the spool",
    refused="a batch of {samples} samples",
    accepted_again="batches accepted again",
)


AGAIN = {
    "queue": "memory queue has room again",
    "spool_write": "spool writable again",
    "memory": "memory lane has room",
    "spool_read": "spool readable again",
    "cap": "spool caught up",
    "spool_ack": "deliveries recorded again",
}


class _Flush:
    def __init__(self) -> None:
        self.done = threading.Event()


class QueuedDelivery(Generic[R, T]):
    """Implements :class:`falcon_gpu.sinks.base.Sink` around ``sink``."""

    def __init__(
        self,
        config: QueueSettings,
        sink: BatchPusher[R, T],
        *,
        spool_dir: Path | str,
        spool_max_bytes: int,
        telemetry: Telemetry,
    ) -> None:
        self.name = config.name
        self.sink = sink
        self.state = DeliveryState()
        self._cfg = config
        self._telemetry = telemetry
        self._key = f"delivery:{self.name}"  # "sink:<name>" is the cycle's key for submit()
        telemetry.register_sink(self.name)
        directory = Path(spool_dir) / self.name
        try:
            self._spool = Spool(
                directory,
                spool_max_bytes,
                on_evict=self._evicted,
                on_corrupt=self._corrupt,
                on_unreadable=self._unreadable,
            )
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"sink {self.name}: cannot use the spool directory {directory} "
                f"({exc.strerror}); set spool_dir to a writable directory",
            ) from None
        telemetry.spool_bytes(self.name, self._spool.size_bytes)
        self._queue: queue.Queue[list[T] | _Flush | None] = queue.Queue(config.queue_max_batches)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._caught_up = threading.Condition()
        self._caught_up_at = 0.0
        self._threads: list[threading.Thread] = []
        self._start_lock = threading.Lock()
        self._closed = False
        self._counted_upto = (-1, -1)  # spool position up to which batches were counted spooled
        self._memory = MemoryLane(config.queue_max_batches)
        # (key, message) for each "works again" line, formatted once: not on every success
        self._again = {
            part: (f"{self._key}:{part}", f"sink {self.name}: {message}") for part, message in AGAIN.items()
        }
        self._settler = Settler(
            config, telemetry=telemetry, state=self.state, stop=self._stop, wording=WORDING
        )

    # -- Sink interface -------------------------------------------------------
    def submit(self, rendered: R) -> None:
        if self._closed:
            return
        self._start()
        self._enqueue(list(self.sink.explode(rendered)))

    def _enqueue(self, items: list[T]) -> None:
        """Hand items to the batcher (the cycle's, and the pusher's ``closing`` ones at close)."""
        if not items:
            return
        self._start()
        try:
            self._queue.put_nowait(items)
            self._telemetry.recovered(*self._again["queue"])
        except queue.Full:
            self._telemetry.samples(self.name, "dropped", len(items))
            self._telemetry.failing(
                f"{self._key}:queue",
                "sink_queue_full",
                f"sink {self.name}: memory queue full (spool too slow?), dropping cycles",
            )

    def check(self) -> tuple[bool, str]:
        return self.sink.check()

    def undelivered(self) -> str | None:
        """Nothing is lost here: what did not arrive waits in the spool for the next run."""
        return None

    def flush(self, timeout: float) -> bool:
        """Spool everything submitted, then wait up to ``timeout`` s for delivery.
        True when everything was delivered; False when some waits in the spool."""
        return self._flush(timeout, while_failing=True)

    def _flush(self, timeout: float, *, while_failing: bool) -> bool:
        if not self._threads:
            self._start()
        deadline = time.monotonic() + timeout
        marker = _Flush()
        try:
            self._queue.put(marker, timeout=timeout)
        except queue.Full:
            return False
        if not marker.done.wait(max(0.0, deadline - time.monotonic())):
            return False
        spooled_at = time.monotonic()
        self._wake.set()
        with self._caught_up:
            while self._caught_up_at < spooled_at:
                left = deadline - time.monotonic()
                # a failing spool is no reason to stop waiting: the memory lane still drains
                if left <= 0 or (not while_failing and self.state.server_down):
                    return False
                self._caught_up.wait(min(left, 0.1))
            return True

    def close(self, timeout: float) -> None:
        """Spool what is pending and the pusher's ``closing`` items; wait up to ``timeout``
        for delivery unless the server is failing (then the spool keeps it for the next
        start: no point holding up a shutdown for a server that is down); stop the threads."""
        if self._closed:
            return
        self._enqueue(list(self.sink.closing()))
        self._closed = True
        deadline = time.monotonic() + timeout
        if self._threads:
            self._flush(timeout, while_failing=False)
            with contextlib.suppress(queue.Full):  # else the batcher is stuck on the disk (a daemon)
                self._queue.put(None, timeout=max(0.1, deadline - time.monotonic()))
            self._stop.set()
            self._wake.set()
            for t in self._threads:
                t.join(max(0.1, deadline - time.monotonic()))
        if not any(t.is_alive() for t in self._threads):
            self._spool.close()
            lost = self._memory.samples()
            if lost:  # they never reached the disk
                self._telemetry.samples(self.name, "dropped", lost)
                log.warning("sink %s: %d samples held in memory (spool unwritable) are lost", self.name, lost)
        self.sink.close()

    # -- threads --------------------------------------------------------------
    def _start(self) -> None:
        with self._start_lock:
            if self._threads:
                return
            for target, role in ((self._batch_loop, "batcher"), (self._send_loop, "sender")):
                t = threading.Thread(target=target, name=f"falcon-gpu-{self.name}-{role}", daemon=True)
                self._threads.append(t)
                t.start()

    def _batch_loop(self) -> None:
        pending: list[T] = []
        first_at = 0.0
        max_n, max_age = self._cfg.batch_max_samples, self._cfg.batch_max_age
        while True:
            wait = None if not pending else max(0.0, first_at + max_age - time.monotonic())
            try:
                msg = self._queue.get(timeout=wait)
            except queue.Empty:
                msg = _Flush()  # the oldest pending item reached batch_max_age
            if isinstance(msg, list):
                if not pending:
                    first_at = time.monotonic()
                pending.extend(msg)
                while len(pending) >= max_n:
                    self._spool_batch(pending[:max_n])
                    del pending[:max_n]
                continue
            if pending:
                self._spool_batch(pending)
                pending = []
            if msg is None:
                return
            msg.done.set()

    def _spool_batch(self, items: list[T]) -> None:
        try:
            body = self.sink.encode(items)
            if self._memory:  # older batches wait in memory: keep the order
                self._keep_in_memory(len(items), body)
                return
            position = self._spool.append(len(items), body)
        except SpoolBusy as exc:
            self._telemetry.samples(self.name, "dropped", len(items))
            self._telemetry.failing(
                f"{self._key}:spool_write", "spool_write", f"sink {self.name}: {exc}; dropping batches"
            )
            return
        except OSError as exc:
            self.state.spool_write_failed()
            self._telemetry.failing(
                f"{self._key}:spool_write",
                "spool_write",
                f"sink {self.name}: cannot write the spool ({exc}); keeping up to "
                f"{self._cfg.queue_max_batches} batches in memory (not durable) until it can",
            )
            self._keep_in_memory(len(items), body)
            return
        except Exception as exc:  # an encoding bug must not kill the worker
            self._telemetry.samples(self.name, "dropped", len(items))
            self._telemetry.failing(
                f"{self._key}:encode",
                "sink_encode",
                f"sink {self.name}: cannot encode a batch: {exc!r}",
                level=logging.ERROR,
            )
            return
        self.state.spool_written()
        self._telemetry.recovered(*self._again["spool_write"])
        if self.state.server_down:  # this batch waits
            self._telemetry.samples(self.name, "spooled", len(items))
            self._counted_upto = (position.seq, position.offset)
        self._telemetry.spool_bytes(self.name, self._spool.size_bytes)
        self._wake.set()

    def _keep_in_memory(self, samples: int, body: bytes) -> None:
        waits = self.state.server_down
        if not self._memory.offer(MemoryEntry(samples, body, counted=waits)):
            self._telemetry.samples(self.name, "dropped", samples)
            self._telemetry.failing(
                f"{self._key}:memory",
                "sink_queue_full",
                f"sink {self.name}: spool unwritable and {len(self._memory)} batches already in memory; "
                "dropping new batches",
            )
            return
        if waits:
            self._telemetry.samples(self.name, "spooled", samples)
        self._wake.set()

    def _next(self) -> Entry | MemoryEntry | None:
        """The oldest batch: the spool's first, then the memory lane's (always newer). A
        spool that cannot be opened or read does not hold up the memory lane."""
        try:
            entry = self._spool.next()
        except SpoolBusy:  # the batcher counts and logs it (its batches are dropped)
            return None
        except OSError as exc:
            self._telemetry.failing(
                f"{self._key}:spool_read",
                "spool_read",
                f"sink {self.name}: cannot read the spool ({exc}); sending the batches held in "
                "memory meanwhile, what the spool holds waits until it can be read",
            )
            return self._memory.head()
        self._telemetry.recovered(*self._again["spool_read"])
        return self._memory.head() if entry is None else entry

    def _send_loop(self) -> None:
        progress = ReplayProgress(self.name, self._spool.backlog_at_start)
        while not self._stop.is_set():
            entry = self._next()
            if entry is None:
                progress.done()
                # caught up: the next outage that overflows the cap is logged again
                self._telemetry.recovered(*self._again["cap"])
                with self._caught_up:
                    self._caught_up_at = time.monotonic()
                    self._caught_up.notify_all()
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            outcome = self._deliver(entry)
            if outcome is None:
                return
            if outcome:  # it had to wait: what piled up meanwhile is a replay worth reporting
                progress.begin(self._spool.size_bytes)
            progress.step(self._spool.size_bytes)
            self._telemetry.spool_bytes(self.name, self._spool.size_bytes)

    def _deliver(self, entry: Entry | MemoryEntry) -> bool | None:
        """Push one batch until it is settled: None when the sink is stopping, else
        whether it had to be retried."""

        def first_failure() -> None:  # count it spooled unless the batcher already did
            if isinstance(entry, MemoryEntry):
                if not entry.counted:
                    entry.counted = True
                    self._telemetry.samples(self.name, "spooled", entry.samples)
            elif (entry.position.seq, entry.position.offset) > self._counted_upto:
                self._telemetry.samples(self.name, "spooled", entry.samples)

        result = self._settler.settle(
            lambda: self.sink.push(entry.body, entry.samples), entry.samples, first_failure=first_failure
        )
        if result.settled is Settled.INTERRUPTED:
            if isinstance(entry, Entry) and not self._spool.holds(entry):
                # evicted by the cap while in flight: lost now (memory entries: counted by close)
                self._telemetry.samples(self.name, "dropped", entry.samples)
            return None
        failed = result.retried
        if isinstance(entry, MemoryEntry):
            self._memory.done()
            if not self._memory:
                self._telemetry.recovered(*self._again["memory"])
            return failed
        try:
            self._spool.ack(entry)
        except OSError as exc:  # disk full: the sender goes on; a restart re-sends (at-least-once)
            self._telemetry.failing(
                f"{self._key}:spool_ack",
                "spool_write",
                f"sink {self.name}: cannot record a delivery in the spool ({exc}); "
                "after a restart it would be sent again",
            )
            return failed
        self._telemetry.recovered(*self._again["spool_ack"])
        return failed

    def _evicted(self, samples: int, message: str) -> None:
        self._telemetry.samples(self.name, "dropped", samples)
        self._telemetry.failing(f"{self._key}:cap", "spool_full", f"sink {self.name}: {message}")

    def _corrupt(self, message: str) -> None:
        self._telemetry.error("spool_corrupt")
        log.warning("sink %s: corrupt spool: %s", self.name, message)

    def _unreadable(self, item: Unreadable) -> None:
        """One segment that cannot be read: counted and logged once (each segment is set
        aside, so it is not met again), and delivery goes on with the next."""
        self._telemetry.error("spool_read")
        where = (
            f"set it aside as {item.moved_to}"
            if item.moved_to is not None
            else "left it in place (it cannot be renamed either) and skip it until the agent restarts"
        )
        log.warning(
            "sink %s: cannot read spool segment %s (%s); %s and go on with the batches after it. "
            "Its batches are not sent: fix the cause (file owner and mode must let the agent's user "
            "read it, or the disk reports I/O errors), and delete the file once it is not needed",
            self.name,
            item.path,
            item.reason,
            where,
        )
