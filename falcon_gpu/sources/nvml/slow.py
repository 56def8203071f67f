"""Readings not asked every cycle because their answer is known not to have changed.

On a real driver every NVML call is an ioctl; a reading whose answer cannot have
changed since it was last asked is reused instead of asked again. Four kinds:

- Administrator settings (:meth:`SlowReadings.call`; a table row's ``SETTING``): the enforced power
  limit changes when someone runs ``nvidia-smi -pl``, the infoROM checksum only when the board is
  re-flashed, the MIG mode with a reconfiguration. Re-read once every :data:`REFRESH_S`.
- Readings that follow another one (``call(..., token=...)``; a table row's
  ``Refresh("follows", ...)``, which names the reading it follows): re-read as soon as that reading
  changed, then every cycle until two answers in a row agree (a fan ramping, a clock switching), and at
  least every :data:`REFRESH_S` for a setting that overrides it. The clock event reasons follow the
  throttle counters, the SM clock and whether the GPU is idle, and are asked every cycle while the last
  answer held a limiter (:meth:`SlowReadings.follows`, :mod:`falcon_gpu.sources.nvml.readers.clocks`).
- Answers built from several calls (:meth:`SlowReadings.kept`): a MIG GPU's layout (each
  instance's handle and identity, :mod:`falcon_gpu.sources.nvml.readers.mig`), built again
  every :data:`REFRESH_S` or as soon as the caller sees it changed (:meth:`SlowReadings.drop`);
  also a struct decoded into a record, such as the NVLink fabric attachment
  (:mod:`falcon_gpu.sources.nvml.readers.fabric`: a fabric manager's registration and the
  fabric's health, seen within a minute).
- Readings that are zero while nothing uses what they measure (:meth:`SlowReadings.gated`; a table
  row's ``Refresh("gated", ...)``, read by its reader's hook, which sees the evidence):
  asked while the caller sees a use this cycle, while the last answer was not "idle" (to see
  it fall back), and at least every :data:`REFRESH_S` whatever the caller sees (so a wrong
  "not in use" costs at most a minute); otherwise the idle answer is reused.

An answer that came with an unexpected error is not kept (the next cycle asks again);
NOT_SUPPORTED stays remembered by the caller as for every field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from falcon_gpu.sources.nvml.calls import NvmlCaller

REFRESH_S: Final = 60.0
_UNSETTLED: Final = object()
"""The token of an answer that differed from the one before it: equal to no caller's token."""


class SlowReadings:
    """Each scope's kept answers, looked up by scope then field (two look-ups of strings whose hashes
    are cached, cheaper than building and hashing a (scope, field) tuple on every call)."""

    def __init__(self, refresh_s: float = REFRESH_S) -> None:
        self._refresh = refresh_s
        self._kept: dict[str, dict[str, tuple[float, float, Any, Any]]] = {}
        """Per scope, per field: (when asked, until when it is kept: REFRESH_S later, the token it was
        asked under, the answer)."""

    def call(
        self,
        nvml: NvmlCaller,
        now: float,
        scope: str,
        field: str,
        fn_name: str,
        *args: Any,
        answers: Mapping[int, Any] | None = None,
        token: Any = None,
    ) -> Any:
        """``nvml.call(scope, field, fn_name, *args)``, or its answer of less than REFRESH_S ago
        asked under the same ``token`` (with a token: once it answered the same twice in a row)."""
        return self.call_args(nvml, now, scope, field, fn_name, args, token, answers)

    def call_args(
        self,
        nvml: NvmlCaller,
        now: float,
        scope: str,
        field: str,
        fn_name: str,
        args: tuple[Any, ...],
        token: Any = None,
        answers: Mapping[int, Any] | None = None,
    ) -> Any:
        """:meth:`call` with the arguments as one tuple (a caller that holds them so: no ``*args`` call
        with a keyword, which CPython builds a tuple and a dict for)."""
        fields = self._kept.get(scope)
        if fields is not None:
            kept = fields.get(field)
            if kept is not None and kept[2] == token and kept[0] <= now < kept[1]:
                return kept[3]  # the usual cycle: nothing more to look at
        return self._follow(nvml, now, scope, field, token, None, nvml.call, (scope, field, fn_name, *args),
                            answers)  # fmt: skip

    def follows(self, nvml: NvmlCaller, now: float, scope: str, field: str, token: Any,
                again: Callable[[Any], bool], ask: Callable[..., Any], *args: Any) -> Any:  # fmt: skip
        """``ask(*args)`` (an :class:`NvmlCaller` method) as :meth:`call` with a token, and also every
        cycle while ``again`` holds for the last answer (a state that lasts only while what the token
        counts keeps moving: the answer must be asked to see it end)."""
        return self._follow(nvml, now, scope, field, token, again, ask, args, None)

    def _follow(self, nvml: NvmlCaller, now: float, scope: str, field: str, token: Any,
                again: Callable[[Any], bool] | None, ask: Callable[..., Any], args: tuple[Any, ...],
                answers: Mapping[int, Any] | None) -> Any:  # fmt: skip
        kept = self._get(scope, field)
        if (
            kept is not None
            and kept[2] == token
            and kept[0] <= now < kept[1]
            and (again is None or not again(kept[3]))
        ):
            return kept[3]
        value = self._ask(nvml, now, scope, field, token, ask, args, answers)
        if token is not None and kept is not None and kept[3] != value:
            fields = self._kept.get(scope)
            if fields is not None and field in fields:  # kept (no error): still moving, ask again next cycle
                fields[field] = (now, now + self._refresh, _UNSETTLED, value)
        return value

    def gated(
        self,
        nvml: NvmlCaller,
        now: float,
        scope: str,
        field: str,
        ask: Callable[..., Any],
        *args: Any,
        in_use: bool,
        idle: Callable[[Any], bool],
    ) -> Any:
        """``ask(*args)`` (an :class:`NvmlCaller` method), or the last answer when that was
        ``idle`` (less than REFRESH_S ago) and the caller sees nothing ``in_use``."""
        if not in_use:
            fields = self._kept.get(scope)
            if fields is not None:
                kept = fields.get(field)
                if kept is not None and kept[0] <= now < kept[1] and idle(kept[3]):
                    return kept[3]
        return self._ask(nvml, now, scope, field, None, ask, args, None)

    def kept(
        self, nvml: NvmlCaller, now: float, scope: str, field: str, build: Callable[..., Any], *args: Any
    ) -> Any:
        """``build(*args)`` (NVML calls that together make one answer, such as a MIG layout), or
        its answer of less than REFRESH_S ago; :meth:`drop` makes the next call build it again."""
        kept = self._get(scope, field)
        if kept is not None and kept[0] <= now < kept[1]:
            return kept[3]
        return self._ask(nvml, now, scope, field, None, build, args, None)

    def drop(self, scope: str, field: str) -> None:
        """Ask ``field`` again next time (what it was built from is known to have changed)."""
        fields = self._kept.get(scope)
        if fields:
            fields.pop(field, None)

    def _get(self, scope: str, field: str) -> tuple[float, float, Any, Any] | None:
        fields = self._kept.get(scope)
        return None if fields is None else fields.get(field)

    def _ask(
        self,
        nvml: NvmlCaller,
        now: float,
        scope: str,
        field: str,
        token: Any,
        ask: Callable[..., Any],
        args: tuple[Any, ...],
        answers: Mapping[int, Any] | None,
    ) -> Any:
        errors = len(nvml.errors)
        value = ask(*args) if answers is None else ask(*args, answers=answers)
        if len(nvml.errors) == errors:
            fields = self._kept.get(scope)
            if fields is None:
                fields = self._kept[scope] = {}
            fields[field] = (now, now + self._refresh, token, value)
        else:
            self.drop(scope, field)
        return value

    def forget(self) -> None:
        """Ask everything again (the devices were looked up again)."""
        self._kept.clear()
