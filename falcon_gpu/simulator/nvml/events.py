"""Simulated NVML event sets: XID critical errors, delivered once their cycle has come.

A scenario's ``xid_events`` entry ``{cycle, xid}`` is delivered by
``nvmlEventSetWait`` to every event set that registered its GPU, exactly once per
set, as soon as the simulated cycle is at or past ``cycle``. Without a pending
event the wait blocks for the whole timeout it was given, waking only when an
event becomes due (a cycle begins: ``nvmlDeviceGetCount``) or the set is freed,
and then raises ``NVMLError(NVML_ERROR_TIMEOUT)``, as NVML does. (It used to wake
every 50 ms, which cost an idle agent 4 ms of CPU per second and made every
measurement of it look twice as expensive.)

Registering a lost GPU succeeds: a GPU lost from cycle 0 stands for one that fell
off the bus before the agent's first cycle, and its XID 79 must still be seen.
"""

from __future__ import annotations

from typing import Any

import pynvml

from falcon_gpu.simulator.nvml.core import NOT_AVAILABLE_UINT, NvmlStruct, SimCore, SimDevice, fail


class SimEventSet:
    """An event set handle (``nvmlEventSetCreate``): the GPUs registered in it, what it was handed."""

    __slots__ = ("delivered", "devices", "freed")

    def __init__(self) -> None:
        self.devices: list[SimDevice] = []
        self.delivered: set[tuple[int, int]] = set()
        """(GPU index, position in its ``xid_events``) already handed out."""
        self.freed = False


class EventCalls(SimCore):
    def nvmlEventSetCreate(self) -> SimEventSet:
        self._enter("nvmlEventSetCreate")
        return SimEventSet()

    def nvmlDeviceRegisterEvents(self, handle: Any, eventTypes: int, eventSet: Any) -> None:
        dev = self._device(handle, "nvmlDeviceRegisterEvents", identity=True)  # see the module docstring
        if not isinstance(eventSet, SimEventSet) or eventSet.freed:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if not dev.gpu.supports("xid_events") or not eventTypes & pynvml.nvmlEventTypeXidCriticalError:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        with self._cond:
            if dev not in eventSet.devices:
                eventSet.devices.append(dev)

    def _next_event(self, event_set: SimEventSet) -> NvmlStruct | None:
        with self._cond:
            for dev in event_set.devices:
                for i, event in enumerate(dev.gpu.xid_events):
                    key = (dev.index, i)
                    if event.cycle <= self.cycle and self._cycle >= 0 and key not in event_set.delivered:
                        event_set.delivered.add(key)
                        return NvmlStruct(
                            device=dev,
                            eventType=pynvml.nvmlEventTypeXidCriticalError,
                            eventData=event.xid,
                            gpuInstanceId=NOT_AVAILABLE_UINT,
                            computeInstanceId=NOT_AVAILABLE_UINT,
                        )
        return None

    def nvmlEventSetWait(self, eventSet: Any, timeoutms: int) -> NvmlStruct:
        self._enter("nvmlEventSetWait")
        if not isinstance(eventSet, SimEventSet) or eventSet.freed:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        event = self._next_event(eventSet)
        if event is None and timeoutms > 0:
            found: list[NvmlStruct] = []

            def due() -> bool:
                got = self._next_event(eventSet)
                if got is not None:
                    found.append(got)
                return bool(found) or eventSet.freed

            with self._cond:
                self._cond.wait_for(due, timeoutms / 1000)
            event = found[0] if found else None
        if event is None:
            fail(pynvml.NVML_ERROR_TIMEOUT)
        return event

    def nvmlEventSetFree(self, eventSet: Any) -> None:
        self._enter("nvmlEventSetFree")
        if not isinstance(eventSet, SimEventSet) or eventSet.freed:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        with self._cond:
            eventSet.freed = True
            self._cond.notify_all()
