"""The one helper every NVML call goes through.

NVML answers many "errors" that are really answers: NOT_SUPPORTED (this device
has no fan), NOT_FOUND (an empty MIG slot, no new utilisation samples),
FUNCTION_NOT_FOUND or a missing pynvml attribute (an older driver or binding).
:meth:`NvmlCaller.call` turns those into :data:`ABSENT` and remembers the
permanent ones, so a field a device does not support is asked once, said once per
GPU model (:mod:`~falcon_gpu.sources.nvml.unsupported`), and never asked again. Errors
that mean the device itself is gone (GPU_IS_LOST, ...) raise :class:`DeviceGone` so
the source can mark that device down; any other error is recorded in
:attr:`NvmlCaller.errors` for the reader framework to count, and answers ABSENT. No
pynvml exception leaves this module.

Versioned functions (process lists v3 -> v2 -> v1, memory info v2 -> v1) go through
:meth:`NvmlCaller.call_first`, which probes the variants once and caches the choice.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pynvml

from falcon_gpu.model.text import host_bytes, utf8_text
from falcon_gpu.sources.nvml.library import CFunctions, NvmlLibrary, c_functions
from falcon_gpu.sources.nvml.unsupported import UnsupportedLog

log = logging.getLogger("falcon_gpu.nvml")

DEVICE_FATAL: Final = frozenset(
    {
        pynvml.NVML_ERROR_GPU_IS_LOST,
        pynvml.NVML_ERROR_RESET_REQUIRED,
        pynvml.NVML_ERROR_GPU_NOT_FOUND,
        pynvml.NVML_ERROR_UNINITIALIZED,
        pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
        pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    }
)
"""Codes after which nothing more can be read from the device this cycle."""

VARIANT_FALLBACK: Final = frozenset(
    {pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH}
)

Variant = tuple[str, str, Mapping[str, Any]]
"""(label, function name, keyword args) of one generation of a call; positional args are the call's.
Callers keep their variant tuples as constants: :meth:`NvmlCaller.call_first` builds nothing per call."""


class Absent:
    """The answer "not available": distinct from None, which some calls return on success."""

    _instance: Absent | None = None

    def __new__(cls) -> Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = Absent()


class NvmlFailure(Exception):
    """An NVML call failed; ``code`` is the NVML return code (None: not an NVML error)."""

    def __init__(self, code: int | None, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class DeviceGone(NvmlFailure):
    """The device stopped answering (GPU_IS_LOST, RESET_REQUIRED, driver gone, ...)."""


def nvml_code(exc: BaseException) -> int | None:
    if isinstance(exc, pynvml.NVMLError):
        value = getattr(exc, "value", None)
        return value if isinstance(value, int) else None
    return None


def describe(exc: BaseException) -> str:
    """A one-line description of a failed call, with the NVML code when there is one."""
    code = nvml_code(exc)
    if code is None:
        return f"{type(exc).__name__}: {exc}"
    try:
        text = str(exc)
    except Exception:
        text = "NVML error"
    return f"{text} (NVML_ERROR code {code})"


def text(value: Any) -> str:
    """pynvml returns str, older bindings bytes; either way text every sink can encode (a lone
    surrogate becomes U+FFFD, :mod:`falcon_gpu.model.text`)."""
    return value.decode(errors="replace") if isinstance(value, bytes) else utf8_text(str(value))


class NvmlCaller:
    """Calls ``nvml*`` functions of one library by name; see the module docstring."""

    def __init__(self, lib: NvmlLibrary) -> None:
        self.lib = lib
        self.functions: CFunctions | None = c_functions(lib)
        """The library's C functions where the fast path applies (the real pynvml); None: the simulator."""
        self.errors: list[str] = []
        """Unexpected failures since the framework last cleared it (one reader's worth)."""
        self._missing: set[str] = set()
        self._not_supported: set[tuple[str, str]] = set()
        self.unsupported = UnsupportedLog()
        """What was found not supported, said once per GPU model by the source (not per GPU)."""
        self.generation = 0
        """Changes whenever the not-supported set does (for callers that cache what to ask)."""
        self._variant: dict[str, tuple[int, str, Sequence[Variant]]] = {}
        """Per family: (index of the chosen variant, its label, the variants it indexes)."""

    # -- what is known not to work ------------------------------------------
    def supported(self, scope: str, field: str) -> bool:
        return (scope, field) not in self._not_supported

    def mark_not_supported(self, scope: str, field: str, *, quiet: bool = False) -> None:
        """Remember NOT_SUPPORTED and note it for the per-model line (:attr:`unsupported`); ``quiet``:
        the caller notes a summary of several instead."""
        if (scope, field) not in self._not_supported:
            self._not_supported.add((scope, field))
            self.generation += 1
            if not quiet:
                self.unsupported.note(scope, field)

    def forget_not_supported(self, scope: str) -> None:
        """Ask ``scope``'s fields again: its mode changed (MIG on/off changes what NVML
        supports: utilisation and process samples answer NOT_SUPPORTED only under MIG)."""
        gone = {key for key in self._not_supported if key[0] == scope}
        self._not_supported -= gone
        self.generation += 1

    def _mark_missing(self, fn_name: str) -> None:
        if fn_name not in self._missing:
            self._missing.add(fn_name)
            log.info("NVML: %s is not available in this driver/binding; not calling it again", fn_name)

    def _function(self, fn_name: str) -> Any:
        if fn_name in self._missing:
            return None
        fn = getattr(self.lib, fn_name, None)
        if fn is None:
            self._mark_missing(fn_name)
        return fn

    # -- calls ------------------------------------------------------------
    def invoke(self, fn_name: str, *args: Any, **kwargs: Any) -> Any:
        """Call and return, or raise NvmlFailure (DeviceGone for device-fatal codes).

        For the few callers that need the exact outcome (init, event waits)."""
        fn = self._function(fn_name)
        if fn is None:
            raise NvmlFailure(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, f"{fn_name} is not available")
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            code = nvml_code(exc)
            if code == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
                self._mark_missing(fn_name)
            kind = DeviceGone if code in DEVICE_FATAL else NvmlFailure
            raise kind(code, f"{fn_name}: {describe(exc)}") from None

    def call(
        self,
        scope: str,
        field: str,
        fn_name: str,
        *args: Any,
        answers: Mapping[int, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """The value, or ABSENT. ``answers`` maps return codes that are answers (e.g.
        CORRUPTED_INFOROM -> False) to values. Raises DeviceGone only."""
        if (scope, field) in self._not_supported:
            return ABSENT
        # _function, written out: this runs for every NVML call of every cycle
        fn = None if fn_name in self._missing else getattr(self.lib, fn_name, None)
        if fn is None:
            self._function(fn_name)  # logs a missing function once
            return ABSENT
        try:
            return fn(*args, **kwargs) if kwargs else fn(*args)  # ``**{}`` would copy the empty dict
        except Exception as exc:
            return self._failed(exc, scope, field, fn_name, answers)

    def code_failed(
        self, scope: str, field: str, fn_name: str, code: int, answers: Mapping[int, Any] | None = None
    ) -> Any:
        """What :meth:`call` answers where ``fn_name``'s C function, called straight
        (:mod:`falcon_gpu.sources.nvml.direct`), returned ``code`` (not SUCCESS): the same rules, through
        the same exception pynvml's wrapper would have raised. Raises DeviceGone only."""
        return self._failed(pynvml.NVMLError(code), scope, field, fn_name, answers)

    def _failed(
        self, exc: Exception, scope: str, field: str, fn_name: str, answers: Mapping[int, Any] | None
    ) -> Any:
        if isinstance(exc, UnicodeDecodeError) and isinstance(exc.object, bytes):
            return host_bytes(exc.object)  # pynvml decodes strictly: a process name not in UTF-8 is a name
        code = nvml_code(exc)
        if answers is not None and code is not None and code in answers:
            return answers[code]
        if code == pynvml.NVML_ERROR_NOT_SUPPORTED:
            self.mark_not_supported(scope, field)
        elif code == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
            self._mark_missing(fn_name)
        elif code == pynvml.NVML_ERROR_NOT_FOUND:
            pass
        elif code in DEVICE_FATAL:
            raise DeviceGone(code, f"{fn_name}: {describe(exc)}") from None
        else:
            self.errors.append(f"{field}: {fn_name} failed: {describe(exc)}")
        return ABSENT

    def call_first(
        self,
        scope: str,
        field: str,
        family: str,
        variants: Sequence[Variant],
        *args: Any,
        fallback: frozenset[int] = VARIANT_FALLBACK,
    ) -> Any:
        """Call ``fn(*args, **kwargs)`` of the newest variant that exists, probing once per
        ``family`` and caching the choice. A variant is skipped when its function is missing,
        rejects the arguments (TypeError with keyword args) or answers a code in ``fallback``.

        Once a variant is chosen (for these very ``variants``), the usual call asks it straight away;
        only a failure or a missing function goes on to the variants after it (:meth:`_probe`)."""
        if (scope, field) in self._not_supported:
            return ABSENT
        chosen = self._variant.get(family)
        if chosen is not None and chosen[2] is variants:
            i = chosen[0]
            _, fn_name, kwargs = variants[i]
            # _function, written out (as in call): two of these per GPU and cycle
            fn = None if fn_name in self._missing else getattr(self.lib, fn_name, None)
            if fn is not None:
                try:
                    return fn(*args, **kwargs) if kwargs else fn(*args)
                except Exception as exc:
                    return self._variant_failed(exc, scope, field, family, variants, i, args, fallback)
        return self._probe(scope, field, family, variants, args, fallback, chosen)

    def _probe(
        self,
        scope: str,
        field: str,
        family: str,
        variants: Sequence[Variant],
        args: tuple[Any, ...],
        fallback: frozenset[int],
        chosen: tuple[int, str, Sequence[Variant]] | None,
        start: int | None = None,
    ) -> Any:
        """:meth:`call_first` from variant ``start`` (default: the chosen one, else the newest) on; the
        first that answers becomes the family's choice."""
        if start is None:
            start = chosen[0] if chosen is not None and chosen[0] < len(variants) else 0
        for i in range(start, len(variants)):
            label, fn_name, kwargs = variants[i]
            fn = self._function(fn_name)
            if fn is None:
                continue
            try:
                value = fn(*args, **kwargs)
            except Exception as exc:
                return self._variant_failed(exc, scope, field, family, variants, i, args, fallback)
            if chosen is None or chosen[0] != i or chosen[2] is not variants:
                self._variant[family] = (i, label, variants)
                log.debug("NVML: using %s for %s", label, family)
            return value
        return ABSENT

    def _variant_failed(
        self,
        exc: Exception,
        scope: str,
        field: str,
        family: str,
        variants: Sequence[Variant],
        i: int,
        args: tuple[Any, ...],
        fallback: frozenset[int],
    ) -> Any:
        """Variant ``i`` raised: go on to the next one where that means "not this generation" (a
        TypeError with keyword args, a code in ``fallback``), else the call's answer (:meth:`_failed`)."""
        _, fn_name, kwargs = variants[i]
        if i < len(variants) - 1 and (
            (kwargs and isinstance(exc, TypeError))
            or (not isinstance(exc, TypeError) and nvml_code(exc) in fallback)
        ):
            return self._probe(
                scope, field, family, variants, args, fallback, self._variant.get(family), i + 1
            )
        return self._failed(exc, scope, field, fn_name, None)

    def chosen(self, family: str) -> str | None:
        """The variant label cached for ``family`` (for tests and ``doctor``)."""
        chosen = self._variant.get(family)
        return None if chosen is None else chosen[1]
