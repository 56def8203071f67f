"""NVML's lifetime: ``nvmlInit`` retried with exponential backoff, ``nvmlShutdown`` on close.

A node without a driver (or a container without the library mounted) must not
take the agent down: the cycle gets ``Snapshot(nvml_ok=False)``, the failure is
counted as ``errors_total{kind="nvml_init"}`` and logged once, and init is tried
again after 1 s, 2 s, 4 s ... up to 5 minutes, never more often. The clock is
injected so tests can walk through the schedule without sleeping.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from types import MappingProxyType
from typing import Final

import pynvml

from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sources.nvml.calls import ABSENT, NvmlCaller, NvmlFailure, text

INITIAL_DELAY_S = 1.0
MAX_DELAY_S = 300.0

_HINTS: Final = MappingProxyType(
    {
        pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: "libnvidia-ml.so.1 was not found: install the NVIDIA driver, "
        "or mount the driver libraries into the container (NVIDIA container toolkit)",
        pynvml.NVML_ERROR_DRIVER_NOT_LOADED: "the NVIDIA kernel driver is not loaded (is this a GPU node?)",
        pynvml.NVML_ERROR_NO_PERMISSION: "no permission to open /dev/nvidia*: grant the devices",
        pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH: "the NVML library and the kernel driver versions differ: "
        "restart the agent after a driver upgrade",
    }
)


def cuda_version_text(value: int) -> str:
    """NVML's 12040 -> "12.4"."""
    return f"{value // 1000}.{(value % 1000) // 10}"


class NvmlSession:
    """Whether NVML is up, and when to try starting it again."""

    def __init__(
        self,
        caller: NvmlCaller,
        telemetry: Telemetry,
        clock: Callable[[], float] = time.monotonic,
        *,
        initial_delay: float = INITIAL_DELAY_S,
        max_delay: float = MAX_DELAY_S,
        retrying: bool = True,
    ) -> None:
        """``retrying=False``: a one-shot command (``run --once``, ``plugin``, ``doctor``, ``top
        --once``), which ends after its cycle: the failure says what is wrong, not when the next
        try (that never comes) would be."""
        self._caller = caller
        self._telemetry = telemetry
        self._clock = clock
        self._initial = initial_delay
        self._max = max_delay
        self._delay = initial_delay
        self._retrying = retrying
        self._next_attempt = float("-inf")
        self.up = False
        self.error: str | None = None
        self.driver_version: str | None = None
        self.cuda_version: str | None = None

    def ensure(self) -> bool:
        """True when NVML is up; otherwise try init if the backoff schedule allows."""
        if self.up:
            return True
        now = self._clock()
        if now < self._next_attempt:
            return False
        try:
            self._caller.invoke("nvmlInit")
        except NvmlFailure as failure:
            hint = _HINTS.get(failure.code or 0, "")
            self.error = f"NVML cannot start: {failure.message}" + (f"; {hint}" if hint else "")
            retry = f" (retrying with backoff, next in {self._delay:g}s)" if self._retrying else ""
            self._telemetry.failing("nvml", "nvml_init", self.error + retry)
            self._next_attempt = now + self._delay
            self._delay = min(self._delay * 2, self._max)
            return False
        self.up = True
        self.error = None
        self._delay = self._initial
        self._telemetry.recovered("nvml", "NVML started")
        self._read_versions()
        return True

    def _read_versions(self) -> None:
        driver = self._caller.call("system", "driver_version", "nvmlSystemGetDriverVersion")
        self.driver_version = None if driver is ABSENT else text(driver)
        cuda = self._caller.call("system", "cuda_version", "nvmlSystemGetCudaDriverVersion")
        self.cuda_version = cuda_version_text(int(cuda)) if isinstance(cuda, int) else None
        self._caller.errors.clear()

    def lost(self, reason: str) -> None:
        """NVML stopped answering as a whole (driver unloaded, ...): shut down and re-init later."""
        self.close()
        self.error = reason
        self._telemetry.failing("nvml", "nvml_init", f"NVML stopped answering: {reason}; re-initialising")
        self._next_attempt = self._clock() + self._delay
        self._delay = min(self._delay * 2, self._max)

    def close(self) -> None:
        if self.up:
            self.up = False
            with contextlib.suppress(NvmlFailure):
                self._caller.invoke("nvmlShutdown")
