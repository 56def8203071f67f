"""The state shared by every part of :class:`~falcon_gpu.simulator.nvml.library.SimulatedNvml`.

Holds the scenario, the init reference count, the cycle counter, the device
handles and a per-function call counter (so tests can assert that a field
answered NOT_SUPPORTED is not asked again). Errors are the real
``pynvml.NVMLError(code)`` so that code written against pynvml sees exactly
what it would see on a GPU node.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, NoReturn

import pynvml

from falcon_gpu.simulator.scenario.parse import GpuScenario, MigScenario, Scenario, at

NOT_AVAILABLE_UINT = 0xFFFFFFFF
"""What NVML puts in gpuInstanceId/computeInstanceId of a process outside MIG."""

STAMPS_KEPT = 64
"""Cycles of process-utilisation samples the simulator remembers (bounded like NVML's buffer)."""


class NvmlStruct(SimpleNamespace):
    """A struct-like answer with pynvml's attribute names (``total``, ``busId``, ``smUtil``...)."""


def fail(code: int) -> NoReturn:
    raise pynvml.NVMLError(code)


@dataclass(eq=False)
class SimDevice:
    """A device handle, as ``nvmlDeviceGetHandleByIndex`` returns it."""

    index: int
    gpu: GpuScenario


@dataclass(eq=False)
class SimMigDevice:
    """A MIG device handle (``nvmlDeviceGetMigDeviceHandleByIndex``)."""

    parent: SimDevice
    slot: int
    mig: MigScenario


@dataclass(eq=False)
class SimGpuInstance:
    """A GPU instance handle (``nvmlDeviceGetGpuInstanceById``)."""

    parent: SimDevice
    mig: MigScenario


class SimCore:
    def __init__(self, scenario: Scenario, *, clock: Callable[[], float] = time.time) -> None:
        self.scenario = scenario
        self.clock = clock
        self.fail_init_times = 0
        """Test knob: the next N ``nvmlInit`` calls raise ``init_error`` (then it works)."""
        self.init_error = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
        self.calls: Counter[str] = Counter()
        """How often each ``nvml*`` function was called."""
        self._refs = 0
        self._cycle = -1
        self._stamps: dict[int, int] = {}
        self._cond = threading.Condition()
        self._devices = [SimDevice(i, g) for i, g in enumerate(scenario.gpus)]
        self._gpm_records: dict[int, Any] = {}
        """GPM sample address -> what it was last taken of (None: not yet); see simulator.nvml.gpm."""
        self._gpm_next = 0x10_0000
        self._link_index: dict[int, dict[int, Any]] = {}
        """Per device index: its scenario NVLinks by link number (built on first use)."""

    # -- cycle -----------------------------------------------------------
    @property
    def cycle(self) -> int:
        """The current cycle (0 before the first ``nvmlDeviceGetCount``)."""
        return max(self._cycle, 0)

    def _advance(self) -> None:
        with self._cond:
            self._cycle += 1
            last = self._stamps.get(self._cycle - 1, 0)
            self._stamps[self._cycle] = max(last + 1, int(self.clock() * 1_000_000))
            self._stamps.pop(self._cycle - STAMPS_KEPT, None)
            self._cond.notify_all()

    def stamp(self, cycle: int) -> int | None:
        """The µs timestamp of cycle's process-utilisation samples, if that cycle began."""
        return self._stamps.get(cycle)

    # -- checks every call makes ------------------------------------------
    def _enter(self, fn: str) -> None:
        self.calls[fn] += 1
        if self._refs <= 0:
            fail(pynvml.NVML_ERROR_UNINITIALIZED)

    def _check_lost(self, dev: SimDevice) -> None:
        lost = dev.gpu.lost_at_cycle
        if lost is not None and self.cycle >= lost:
            fail(pynvml.NVML_ERROR_GPU_IS_LOST)

    def _device(self, handle: Any, fn: str, *, identity: bool = False) -> SimDevice:
        """A physical device handle; a MIG handle answers NOT_SUPPORTED, anything else INVALID_ARGUMENT.
        ``identity`` calls keep answering for a lost GPU (see the library docstring)."""
        self._enter(fn)
        if isinstance(handle, SimMigDevice):
            self._check_lost(handle.parent)
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not isinstance(handle, SimDevice):
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if not identity:
            self._check_lost(handle)
        return handle

    def _any(self, handle: Any, fn: str, *, identity: bool = False) -> tuple[SimDevice, SimMigDevice | None]:
        """A device or MIG handle; a MIG handle whose instance no longer exists answers NOT_FOUND."""
        self._enter(fn)
        if isinstance(handle, SimMigDevice):
            self._check_lost(handle.parent)
            if handle.mig not in self.instances(handle.parent):
                fail(pynvml.NVML_ERROR_NOT_FOUND)
            return handle.parent, handle
        if not isinstance(handle, SimDevice):
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if not identity:
            self._check_lost(handle)
        return handle, None

    # -- MIG layout ----------------------------------------------------------
    def mig_on(self, dev: SimDevice) -> bool:
        """The MIG mode this cycle (``mig_mode``; without it: on when the GPU lists instances)."""
        mode = dev.gpu.mig_mode
        return bool(dev.gpu.mig) if mode is None else at(mode, self.cycle) == 1

    def instances(self, dev: SimDevice) -> tuple[MigScenario, ...]:
        """The MIG instances that exist this cycle (created and not yet destroyed; none while MIG is off)."""
        if not dev.gpu.mig or not self.mig_on(dev):
            return ()
        cycle = self.cycle
        return tuple(m for m in dev.gpu.mig if m.present(cycle))

    def _value(self, dev: SimDevice, key: str) -> float:
        """The scenario value of ``key`` this cycle; NOT_SUPPORTED when missing or listed so."""
        series = dev.gpu.values.get(key)
        if series is None or not dev.gpu.supports(key):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return at(series, self.cycle)

    def _int(self, dev: SimDevice, key: str, scale: float = 1.0) -> int:
        return round(self._value(dev, key) * scale)
