"""XID critical-error events, counted per GPU UUID and XID code.

NVML delivers XIDs only as events: an event set, ``nvmlDeviceRegisterEvents`` per
device, then ``nvmlEventSetWait``, which blocks. The agent runs :meth:`XidWatcher.start`
(a daemon thread waiting 1000 ms at a time, so it never blocks the cycle); ``--once``,
the plugin, ``doctor`` and ``top --once`` have no thread: the source calls
:meth:`XidWatcher.drain_now` before reading the GPUs (timeout 0, until NVML answers
TIMEOUT) and again after (:data:`AFTER_READINGS_WAIT_MS` in all, so the cycle still ends
on time), or an XID that a GPU raises during the one cycle such a process has would never
be counted (a falcon-agent node runs a new ``plugin`` every minute). :meth:`counts` is
cumulative since start; :meth:`read` adds the most recent XID per GPU, which counts alone
cannot tell.

The watcher holds its own ``nvmlInit`` reference (NVML counts them) and finds
devices by probing ``nvmlDeviceGetHandleByIndex`` until INVALID_ARGUMENT, rather
than calling ``nvmlDeviceGetCount``: the source calls that exactly once per cycle
(the simulator counts cycles by it). Devices that cannot register (NOT_SUPPORTED,
lost) are skipped; if NVML cannot start, setup is retried with backoff.

A wait that fails with a device-fatal code (a real driver answers GPU_IS_LOST on
every wait of a set holding a GPU that fell off the bus, XID 79) would otherwise
blind the watcher to every other GPU for good: the set is freed and built again,
with backoff, and the lost GPU fails registration and is left out (a drain, which has no
later cycle to wait for, builds it again at once, once per drain). :meth:`stop`
never waits on a thread stuck inside NVML for longer than its join timeout.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from enum import Enum
from typing import Any

import pynvml

from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sources.nvml.calls import DEVICE_FATAL, NvmlCaller, NvmlFailure, text
from falcon_gpu.sources.nvml.library import NvmlLibrary

log = logging.getLogger("falcon_gpu.nvml")

MAX_DEVICES = 64
MAX_DRAIN = 10_000
"""Upper bound of events taken by one drain (a flood must not stall the cycle)."""
AFTER_READINGS_WAIT_MS = 20
"""How long, in all, the drain after a one-shot cycle's readings waits for events: what the GPUs
raised during the readings is queued already (a wait answers it at once); the wait only gives one
raised at the very end its chance, and bounds what a quiet node adds to the cycle."""


_SETUP_AGAIN = DEVICE_FATAL | {pynvml.NVML_ERROR_INVALID_ARGUMENT}
"""Wait failures after which the event set is freed and created (with backoff) again."""
_INIT_AGAIN = frozenset({pynvml.NVML_ERROR_DRIVER_NOT_LOADED, pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH})
"""Wait failures after which NVML itself is shut down and started again: NVML only
reopens the driver when its last reference goes, and the source releases its own."""
MAX_DELAY_S = 300.0


class _Wait(Enum):
    EVENT = 1
    TIMEOUT = 2
    ERROR = 3


def _handle_key(handle: Any) -> int:
    """A handle's identity: the pointer value of a ctypes handle, else the object."""
    try:
        value = ctypes.cast(handle, ctypes.c_void_p).value
        return int(value) if value is not None else id(handle)
    except (TypeError, ctypes.ArgumentError):
        return id(handle)


class XidWatcher:
    def __init__(
        self,
        library: NvmlLibrary,
        telemetry: Telemetry,
        *,
        wait_ms: int = 1000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._nvml = NvmlCaller(library)
        self._telemetry = telemetry
        self._wait_ms = wait_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._wait_lock = threading.Lock()
        self._counts: dict[str, dict[int, int]] = defaultdict(dict)
        self._last: dict[str, int] = {}
        self._event_set: Any = None
        self._inited = False
        self._uuids: dict[int, str] = {}
        self._retry_at = float("-inf")
        self._delay = 1.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unwatched: set[int] = set()
        """GPU indexes said to be left out of the event set."""

    # -- setup ---------------------------------------------------------------
    def _ensure_set(self, *, now: bool = False) -> bool:
        """The event set, built if there is none (``now``: whatever the backoff says)."""
        if self._event_set is not None:
            return True
        if not now and self._clock() < self._retry_at:
            return False
        try:
            if not self._inited:
                self._nvml.invoke("nvmlInit")
                self._inited = True
            event_set = self._nvml.invoke("nvmlEventSetCreate")
        except NvmlFailure as failure:
            self._telemetry.failing(
                "xid:setup", "xid", f"XID events unavailable: {failure.message} (will retry)"
            )
            self._back_off()
            return False
        self._uuids.clear()
        self._register_all(event_set)
        self._event_set = event_set
        self._telemetry.recovered("xid:setup", "XID events are watched")
        return True

    def _back_off(self) -> None:
        """No new setup before 1 s, 2 s, 4 s ... 5 min; reset by a wait that works."""
        self._retry_at = self._clock() + self._delay
        self._delay = min(self._delay * 2, MAX_DELAY_S)

    def _free_set(self) -> None:
        if self._event_set is not None:
            with contextlib.suppress(NvmlFailure):
                self._nvml.invoke("nvmlEventSetFree", self._event_set)
            self._event_set = None

    def _register_all(self, event_set: Any) -> None:
        xid_type = pynvml.nvmlEventTypeXidCriticalError
        for index in range(MAX_DEVICES):
            try:
                handle = self._nvml.invoke("nvmlDeviceGetHandleByIndex", index)
            except NvmlFailure as failure:
                if failure.code in (pynvml.NVML_ERROR_INVALID_ARGUMENT, pynvml.NVML_ERROR_NOT_FOUND):
                    return
                self._not_watching(index, f"GPU {index} (no handle: {failure.message})")
                continue
            try:
                uuid = text(self._nvml.invoke("nvmlDeviceGetUUID", handle))
                self._nvml.invoke("nvmlDeviceRegisterEvents", handle, xid_type, event_set)
            except NvmlFailure as failure:
                self._not_watching(index, f"GPU {index} ({failure.message})")
                continue
            self._uuids[_handle_key(handle)] = uuid

    def _not_watching(self, index: int, why: str) -> None:
        """Say once per GPU that it is left out (a set is built again after each failed wait)."""
        first = index not in self._unwatched
        if first and len(self._unwatched) < MAX_DEVICES:
            self._unwatched.add(index)
        log.log(logging.INFO if first else logging.DEBUG, "XID: not watching %s", why)

    # -- waiting ---------------------------------------------------------------
    def _wait_once(self, timeout_ms: int) -> _Wait:
        try:
            data = self._nvml.invoke("nvmlEventSetWait", self._event_set, timeout_ms)
        except NvmlFailure as failure:
            if failure.code == pynvml.NVML_ERROR_TIMEOUT:
                self._waited()
                return _Wait.TIMEOUT
            self._telemetry.failing("xid:wait", "xid", f"XID event wait failed: {failure.message}")
            if failure.code in _SETUP_AGAIN:
                self._free_set()  # a set is a driver resource: never drop one without freeing it
                if failure.code in _INIT_AGAIN and self._inited:
                    with contextlib.suppress(NvmlFailure):
                        self._nvml.invoke("nvmlShutdown")
                if failure.code in _INIT_AGAIN or failure.code == pynvml.NVML_ERROR_UNINITIALIZED:
                    self._inited = False
                self._back_off()
            return _Wait.ERROR
        self._waited()
        if int(data.eventType) & pynvml.nvmlEventTypeXidCriticalError:
            self._record(data)
        return _Wait.EVENT

    def _waited(self) -> None:
        self._delay = 1.0
        self._telemetry.recovered("xid:wait", "XID event wait works again")

    def _record(self, data: Any) -> None:
        uuid = self._uuids.get(_handle_key(data.device))
        if uuid is None:
            try:
                uuid = text(self._nvml.invoke("nvmlDeviceGetUUID", data.device))
            except NvmlFailure:
                uuid = "unknown"
        xid = int(data.eventData)
        with self._lock:
            per_gpu = self._counts[uuid]
            count = per_gpu[xid] = per_gpu.get(xid, 0) + 1
            self._last[uuid] = xid
        # The first of each (GPU, XID) is a warning; repeats (XID 13/31 can come in floods) are debug.
        log.log(
            logging.WARNING if count == 1 else logging.DEBUG, "XID %d on GPU %s (%d so far)", xid, uuid, count
        )

    def drain_now(self, wait_ms: int = 0) -> bool:
        """Take every pending event, waiting at most ``wait_ms`` in all for them (0: never blocks);
        True when it took an event. A no-op (False) while the thread runs.

        A wait that failed (a set holding a lost GPU answers GPU_IS_LOST) frees the set; a drain has
        no later cycle to retry in, so while NVML is up it builds the set again at once (at most one
        set per drain) and goes on waiting."""
        if self._thread is not None and self._thread.is_alive():
            return False
        taken = built = False
        with self._wait_lock:
            deadline = self._clock() + wait_ms / 1000
            for _ in range(MAX_DRAIN):
                if self._event_set is None:
                    if built or not self._ensure_set(now=self._inited):
                        break
                    built = True
                left_ms = max(0, round((deadline - self._clock()) * 1000))
                outcome = self._wait_once(min(left_ms, wait_ms))
                if outcome is _Wait.EVENT:
                    taken = True
                elif outcome is _Wait.TIMEOUT or self._event_set is not None:
                    break  # nothing more pending, or a failure that kept the set
        return taken

    def drain_after_readings(self) -> bool:
        """:meth:`drain_now` for a cycle's readings just taken (waits :data:`AFTER_READINGS_WAIT_MS`)."""
        return self.drain_now(AFTER_READINGS_WAIT_MS)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._wait_lock:
                ready = self._ensure_set()
                outcome = self._wait_once(self._wait_ms) if ready else _Wait.ERROR
            if outcome is _Wait.ERROR:
                self._stop.wait(1.0)

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> None:
        """Watch in a daemon thread (idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="falcon-gpu-xid", daemon=True)
        self._thread.start()

    def counts(self) -> dict[str, dict[int, int]]:
        """uuid -> xid -> cumulative count (a copy)."""
        return self.read()[0]

    def read(self) -> tuple[dict[str, dict[int, int]], dict[str, int]]:
        """The counts, and uuid -> the XID of the most recent event (counts carry no order),
        copied under one lock so that the newest XID is always among the counted ones."""
        with self._lock:
            return {uuid: dict(per_gpu) for uuid, per_gpu in self._counts.items()}, dict(self._last)

    def stop(self) -> None:
        """Stop the thread (waits at most one wait period plus 2 s) and release the event set;
        a thread that does not come back from NVML is left behind (a daemon), never waited on."""
        self._stop.set()
        timeout = self._wait_ms / 1000 + 2
        stuck = False
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            stuck = self._thread.is_alive()
            self._thread = None
        # A thread stuck in nvmlEventSetWait (a wedged driver) still holds the lock: freeing
        # the set under it would be a use-after-free, and waiting for it would hang shutdown.
        if not self._wait_lock.acquire(timeout=0 if stuck else timeout):
            log.warning("XID: the event thread does not return from NVML; leaving it to exit")
            return
        try:
            self._free_set()
            if self._inited:
                with contextlib.suppress(NvmlFailure):
                    self._nvml.invoke("nvmlShutdown")
                self._inited = False
        finally:
            self._wait_lock.release()
