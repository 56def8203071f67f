"""What a reader gets: the device handle, the call helper, and this cycle's shared state.

A reader is a plain function ``(ctx) -> dict`` whose keys are
:class:`~falcon_gpu.model.snapshot.DeviceReading` field names. It makes its calls
through ``ctx.nvml`` (value or ABSENT, never a pynvml exception) and converts
NVML units to base units. The framework in :mod:`falcon_gpu.sources.nvml.source`
runs each reader in isolation and reports its success per device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from falcon_gpu.sources.nvml.calls import NvmlCaller
from falcon_gpu.sources.nvml.process_names import ProcessNames

Fields = dict[str, Any]


@dataclass
class DeviceContext:
    nvml: NvmlCaller
    handle: Any
    scope: str
    """The device's UUID: the key under which NOT_SUPPORTED answers are remembered."""
    index: int
    timestamp: float
    names: ProcessNames
    last_seen_us: dict[str, int]
    """Per device scope: the newest process-utilisation sample time already consumed."""
    fields: Fields = field(default_factory=dict)
    """What earlier readers produced this cycle (the MIG reader uses the processes)."""
    sm_by_pid: dict[int, float] | None = field(default_factory=dict)
    """PID -> SM share this cycle; None where NVML gives no per-process utilisation."""


Reader = Callable[[DeviceContext], Fields]


def ratio(percent: Any) -> float:
    """NVML percent -> ratio 0-1."""
    return float(percent) / 100.0
