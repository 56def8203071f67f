"""The state shared by every part of :class:`~falcon_gpu.simulator.nvml.library.SimulatedNvml`.

Holds the scenario, the init reference count, the cycle counter, the device
handles and a per-function call counter (so tests can assert that a field
answered NOT_SUPPORTED is not asked again). Errors are the real
``pynvml.NVMLError(code)`` so that code written against pynvml sees exactly
what it would see on a GPU node.

**What a device answers is worked out once per cycle.** A real driver's call is one ioctl; a
simulated one that walked the scenario on every call (a list index, a unit conversion, a new
struct) cost 3-11 µs (``scripts/bench_sim.py``), a fifth of a whole exporter's cycle in
``scripts/bench_peer.py``, on both sides alike. So each device keeps its answers of the current
cycle (``SimDevice.answers``: the value, or the error code, per question), filled when first asked
and dropped when the cycle moves on. From the cycle where the GPU's scenario stops changing
(:func:`~falcon_gpu.simulator.scenario.model.settled_cycle`) they are kept for good, since every
later cycle answers the same; only timestamps (field values, process samples) are per cycle. Every
call still counts in ``calls`` and checks init, the handle and a lost GPU first, so what a caller
can observe is unchanged.
"""

from __future__ import annotations

import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable
from types import SimpleNamespace
from typing import Any, NoReturn, TypeVar

import pynvml

from falcon_gpu.simulator.nvml import violations
from falcon_gpu.simulator.scenario.model import settled_cycle
from falcon_gpu.simulator.scenario.parse import GpuScenario, MigScenario, Scenario, Series, at

NOT_AVAILABLE_UINT = 0xFFFFFFFF
"""What NVML puts in gpuInstanceId/computeInstanceId of a process outside MIG."""

STAMPS_KEPT = 64
"""Cycles of process-utilisation samples the simulator remembers (bounded like NVML's buffer)."""

MAX_ANSWERS = 1024
"""Answers one device keeps at most (a caller asking ever new field-value lists starts it afresh)."""

STAMP = struct.Struct("@q")
"""A timestamp's bytes, as in ``c_nvmlFieldValue_t``."""

T = TypeVar("T")


class NvmlStruct(SimpleNamespace):
    """A struct-like answer with pynvml's attribute names (``total``, ``busId``, ``smUtil``...)."""


def fail(code: int) -> NoReturn:
    raise pynvml.NVMLError(code)


class Refused:
    """A kept answer that is an error: the NVML return code it raises again on every ask."""

    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        self.code = code


_UNSET = object()


class SimDevice:
    """A device handle, as ``nvmlDeviceGetHandleByIndex`` returns it, and what it answers this cycle.

    Compared by identity, like the C handle it stands for (one per device for the whole run)."""

    __slots__ = ("answers", "answers_at", "gpu", "index", "lost", "samples", "settles")

    def __init__(self, index: int, gpu: GpuScenario) -> None:
        self.index = index
        self.gpu = gpu
        self.settles = sys.maxsize if violations.advancing(gpu) else settled_cycle(gpu)
        """From this cycle on every answer repeats (:func:`settled_cycle`); never for a GPU whose
        throttle counters advance every cycle (:mod:`~falcon_gpu.simulator.nvml.violations`)."""
        self.answers: dict[Hashable, Any] = {}
        """This cycle's answers by question (a :class:`Refused` for an error); see the module docstring."""
        self.answers_at = 0
        """The cycle ``answers`` are of: the current one, or ``settles`` once past it."""
        self.lost = gpu.lost_at_cycle is not None and gpu.lost_at_cycle <= 0
        """GPU_IS_LOST in the current cycle."""
        self.samples: dict[int, tuple[int, list[dict[str, int]]]] = {}
        """Per cycle (the last :data:`STAMPS_KEPT`): its stamp and what its process-utilisation samples
        say, worked out on first ask (a settled cycle's rows are shared with the others)."""

    def enter(self, cycle: int) -> None:
        """The node moved on to ``cycle``: forget this cycle's answers unless they still hold."""
        at_cycle = cycle if cycle < self.settles else self.settles
        if at_cycle != self.answers_at:
            self.answers = {}
            self.answers_at = at_cycle
        lost = self.gpu.lost_at_cycle
        self.lost = lost is not None and cycle >= lost


class SimMigDevice:
    """A MIG device handle (``nvmlDeviceGetMigDeviceHandleByIndex``)."""

    __slots__ = ("mig", "parent", "slot")

    def __init__(self, parent: SimDevice, slot: int, mig: MigScenario) -> None:
        self.parent = parent
        self.slot = slot
        self.mig = mig


class SimGpuInstance:
    """A GPU instance handle (``nvmlDeviceGetGpuInstanceById``)."""

    __slots__ = ("mig", "parent")

    def __init__(self, parent: SimDevice, mig: MigScenario) -> None:
        self.parent = parent
        self.mig = mig


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
        self._now = 0
        """``cycle``, kept as a plain attribute (read by nearly every call)."""
        self._stamps: dict[int, int] = {}
        self._stamp_bytes = STAMP.pack(0)
        """This cycle's timestamp as field values carry it (0 before the first cycle)."""
        self._cond = threading.Condition()
        self._devices = [SimDevice(i, g) for i, g in enumerate(scenario.gpus)]
        self._settles = max((d.settles for d in self._devices), default=0)
        self._names: dict[int, str] | None = None
        """PID -> process name of the node's cycle ``_names_at`` (``nvmlSystemGetProcessName``)."""
        self._names_at = 0
        self._gpm_records: dict[int, Any] = {}
        """GPM sample address -> what it was last taken of (None: not yet); see simulator.nvml.gpm."""
        self._gpm_next = 0x10_0000
        self._link_index: dict[int, dict[int, Any]] = {}
        """Per device index: its scenario NVLinks by link number (built on first use)."""

    # -- cycle -----------------------------------------------------------
    @property
    def cycle(self) -> int:
        """The current cycle (0 before the first ``nvmlDeviceGetCount``)."""
        return self._now

    def _advance(self) -> None:
        with self._cond:
            self._cycle += 1
            self._now = cycle = self._cycle
            last = self._stamps.get(cycle - 1, 0)
            stamp = self._stamps[cycle] = max(last + 1, int(self.clock() * 1_000_000))
            self._stamp_bytes = STAMP.pack(stamp)
            self._stamps.pop(cycle - STAMPS_KEPT, None)
            for dev in self._devices:
                dev.enter(cycle)
            if min(cycle, self._settles) != self._names_at:
                self._names = None
            self._cond.notify_all()

    def stamp(self, cycle: int) -> int | None:
        """The µs timestamp of cycle's process-utilisation samples, if that cycle began."""
        return self._stamps.get(cycle)

    def _memo(self, dev: SimDevice, key: Hashable, make: Callable[..., T], *args: Any) -> T:
        """``make(*args)``, worked out once per cycle and device (``key`` names the question): the
        value, or the NVMLError it raised, raised again. A mutable answer is the caller's to copy."""
        answers = dev.answers
        got = answers.get(key, _UNSET)
        if got is _UNSET:
            if len(answers) >= MAX_ANSWERS:
                answers.clear()
            try:
                got = make(*args)
            except pynvml.NVMLError as exc:
                got = Refused(exc.value)
            answers[key] = got
        if type(got) is Refused:
            fail(got.code)
        return got  # type: ignore[no-any-return]

    # -- checks every call makes ------------------------------------------
    def _enter(self, fn: str) -> None:
        self.calls[fn] += 1
        if self._refs <= 0:
            fail(pynvml.NVML_ERROR_UNINITIALIZED)

    @staticmethod
    def _check_lost(dev: SimDevice) -> None:
        if dev.lost:
            fail(pynvml.NVML_ERROR_GPU_IS_LOST)

    def _device(self, handle: Any, fn: str, *, identity: bool = False) -> SimDevice:
        """A physical device handle; a MIG handle answers NOT_SUPPORTED, anything else INVALID_ARGUMENT.
        ``identity`` calls keep answering for a lost GPU (see the library docstring)."""
        self._enter(fn)
        if handle.__class__ is not SimDevice:
            if isinstance(handle, SimMigDevice):
                self._check_lost(handle.parent)
                fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
            if not isinstance(handle, SimDevice):
                fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if handle.lost and not identity:
            fail(pynvml.NVML_ERROR_GPU_IS_LOST)
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
        if handle.lost and not identity:
            fail(pynvml.NVML_ERROR_GPU_IS_LOST)
        return handle, None

    # -- MIG layout ----------------------------------------------------------
    def mig_on(self, dev: SimDevice) -> bool:
        """The MIG mode this cycle (``mig_mode``; without it: on when the GPU lists instances)."""
        mode = dev.gpu.mig_mode
        if mode is None:
            return bool(dev.gpu.mig)
        return self._memo(dev, "mig_on", self._mode_on, mode)

    def _mode_on(self, mode: Series) -> bool:
        return at(mode, self._now) == 1

    def instances(self, dev: SimDevice) -> tuple[MigScenario, ...]:
        """The MIG instances that exist this cycle (created and not yet destroyed; none while MIG is off)."""
        if not dev.gpu.mig:
            return ()
        return self._memo(dev, "instances", self._instances, dev)

    def _instances(self, dev: SimDevice) -> tuple[MigScenario, ...]:
        if not self.mig_on(dev):
            return ()
        cycle = self._now
        return tuple(m for m in dev.gpu.mig if m.present(cycle))

    def _value(self, dev: SimDevice, key: str) -> float:
        """The scenario value of ``key`` this cycle; NOT_SUPPORTED when missing or listed so."""
        series = dev.gpu.values.get(key)
        if series is None or not dev.gpu.supports(key):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return at(series, self._now)

    def _int(self, dev: SimDevice, key: str, scale: float = 1.0) -> int:
        return round(self._value(dev, key) * scale)
