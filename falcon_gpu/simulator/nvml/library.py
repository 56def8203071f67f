"""``SimulatedNvml``: a drop-in for the ``pynvml`` *module*, driven by a scenario.

The NVML source is written against pynvml; ``load_nvml(scenario)`` hands it this
object instead, so the source code is the same on a GPU node and in a test
(DESIGN: the simulator replaces the library, not the source). It offers the
``nvml*`` functions the source calls, with pynvml's names and signatures, every
``NVML_*`` / ``nvml*`` constant and ``NVMLError*`` class re-exported from pynvml,
raises the real ``pynvml.NVMLError(code)``, and answers struct-like objects with
pynvml's attribute names. A function it does not offer is simply missing
(AttributeError), exactly like an old pynvml.

**The cycle counter.** Cycle 0 starts at the first ``nvmlDeviceGetCount()``
call, and every further ``nvmlDeviceGetCount()`` starts the next cycle. This
relies on the source calling it exactly once per cycle, at the start (it does:
see :mod:`falcon_gpu.sources.nvml.source`). Scenario lists are indexed by this
cycle; ``lost_at_cycle`` and ``xid_events`` are compared with it.

**A lost GPU** answers GPU_IS_LOST to every reading from ``lost_at_cycle`` on.
Its handle and identity (``nvmlDeviceGetHandleByIndex``, ``...GetUUID``,
``...GetName``, ``...GetPciInfo``) keep answering, the way NVML serves them from
what it enumerated at init, so that a GPU lost from cycle 0 can still be named
in a one-shot run. (On some real failures even the handle lookup fails; the
source copes with that too, reporting the device down without a UUID.)

**MIG-enabled GPUs** answer NOT_SUPPORTED to ``nvmlDeviceGetUtilizationRates``
and ``nvmlDeviceGetProcessUtilization`` whatever the scenario says, as NVML does
("On MIG-enabled GPUs, querying process utilization is not currently
supported"): memory per instance and per process is all a real MIG node gives.

**Init.** ``nvmlInit`` is reference-counted like NVML's; every other call made
without it raises UNINITIALIZED. Tests can make the next N inits fail with
``sim.fail_init_times = N`` (and ``sim.init_error = code``), a knob kept out of
the JSON format because it is about the agent's retry behaviour, not the node.

**GPM** (``gpm`` of a GPU or MIG instance) is served through pynvml's GPM structs; see
:mod:`falcon_gpu.simulator.nvml.gpm`. **PCIe and NVLink** counters (``pcie``, ``nvlink``) are
field values of ``nvmlDeviceGetFieldValues``, NVLink throughput and the data-link error counters
(``NVML_FI_DEV_NVLINK_ERROR_DL_*``) scoped by link (``scopeId``); ``nvmlDeviceGetNvLinkState`` answers
each link's ``active`` (up unless the scenario says 0; an unlisted link is down).
The **NVLink fabric** (``fabric``) is ``nvmlDeviceGetGpuFabricInfoV``: see
:mod:`falcon_gpu.simulator.nvml.fabric`.

**Call counts.** ``sim.calls["nvmlDeviceGetFanSpeed"]`` says how often a function
was called, so tests can check that a NOT_SUPPORTED field is not asked again.

**Cost.** Each device's answers are worked out once per cycle and kept from the cycle where its
scenario stops changing (see :mod:`falcon_gpu.simulator.nvml.core`), so a call costs about the
same whatever it asks: the simulator stands in for a driver whose calls are one ioctl each, and
must not be what a benchmark of the code calling it measures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pynvml

from falcon_gpu.simulator.nvml.core import NvmlStruct, SimDevice, SimMigDevice, fail
from falcon_gpu.simulator.nvml.device import DeviceCalls
from falcon_gpu.simulator.nvml.events import EventCalls, SimEventSet
from falcon_gpu.simulator.nvml.fabric import FabricCalls
from falcon_gpu.simulator.nvml.gpm import GpmCalls
from falcon_gpu.simulator.nvml.processes import ProcessCalls

__all__ = ["NvmlStruct", "SimDevice", "SimEventSet", "SimMigDevice", "SimulatedNvml"]


def _reexported(name: str) -> object:
    """pynvml's constant or error class of that name (never a function); AttributeError otherwise."""
    value = getattr(pynvml, name, None)
    if (name.startswith("NVMLError") and isinstance(value, type)) or (
        name.startswith(("NVML_", "nvml")) and isinstance(value, int | float | str)
    ):
        return value
    raise AttributeError(name)


class SimulatedNvml(DeviceCalls, ProcessCalls, EventCalls, GpmCalls, FabricCalls):
    """The simulated library; construct with a :class:`~falcon_gpu.simulator.scenario.parse.Scenario`."""

    def nvmlInit(self) -> None:
        self.nvmlInitWithFlags(0)

    def nvmlInitWithFlags(self, flags: int) -> None:
        self.calls["nvmlInit"] += 1
        if self.fail_init_times > 0:
            self.fail_init_times -= 1
            fail(self.init_error)
        self._refs += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self._refs -= 1

    @property
    def initialized(self) -> bool:
        return self._refs > 0

    if not TYPE_CHECKING:  # for mypy a misspelt attribute stays an error

        def __getattr__(self, name: str) -> object:
            """pynvml's ``NVML_*`` / ``nvml*`` constants and ``NVMLError*`` classes, looked up on first
            use and kept on the instance (copying all 1,600 onto the class cost every ``--simulate``
            start about 3 ms)."""
            value = self.__dict__[name] = _reexported(name)
            return value
