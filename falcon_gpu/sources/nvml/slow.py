"""Readings that only an administrator changes: read once a minute per device, reused in between.

The enforced power limit changes when someone runs ``nvidia-smi -pl`` (or a
power-capping daemon does), and the infoROM checksum only when the board is
re-flashed or corrupts; asking them every cycle costs two NVML calls (ioctls)
per GPU per cycle for an answer that is the same the next minute. A new value is
therefore seen within :data:`REFRESH_S`. An answer that came with an unexpected
error is not kept (the next cycle asks again); NOT_SUPPORTED stays remembered by
the caller as for every field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from falcon_gpu.sources.nvml.calls import NvmlCaller

REFRESH_S: Final = 60.0


class SlowReadings:
    def __init__(self, refresh_s: float = REFRESH_S) -> None:
        self._refresh = refresh_s
        self._kept: dict[tuple[str, str], tuple[float, Any]] = {}

    def call(
        self,
        nvml: NvmlCaller,
        now: float,
        scope: str,
        field: str,
        fn_name: str,
        *args: Any,
        answers: Mapping[int, Any] | None = None,
    ) -> Any:
        """``nvml.call(scope, field, fn_name, *args)``, or its answer of less than REFRESH_S ago."""
        key = (scope, field)
        kept = self._kept.get(key)
        if kept is not None and 0 <= now - kept[0] < self._refresh:
            return kept[1]
        errors = len(nvml.errors)
        value = nvml.call(scope, field, fn_name, *args, answers=answers)
        if len(nvml.errors) == errors:
            self._kept[key] = (now, value)
        else:
            self._kept.pop(key, None)
        return value

    def forget(self) -> None:
        """Ask everything again (the devices were looked up again)."""
        self._kept.clear()
