"""Which NVML library the source talks to: the real ``pynvml`` module or the simulator.

Both offer the same ``nvml*`` functions and constants, and both raise
``pynvml.NVMLError``; the source only ever reaches them through
:class:`~falcon_gpu.sources.nvml.calls.NvmlCaller`, so nothing else needs to know which.

The one place that does: :func:`c_functions`, the seam of the real bindings' fast path
(:mod:`falcon_gpu.sources.nvml.direct`), which calls a few of NVML's C functions straight with
buffers kept per device; with the simulator it answers None and every call stays pynvml-level.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from falcon_gpu.simulator.scenario.parse import Scenario

NvmlLibrary: TypeAlias = Any
"""The ``pynvml`` module or a ``SimulatedNvml``: used only through ``getattr`` by name,
so that a function missing from an old pynvml is an answer ("not available"), not a crash."""


def load_nvml(scenario: Scenario | None) -> NvmlLibrary:
    """``None``: the real ``pynvml`` module (importing it loads no driver yet: that
    happens in ``nvmlInit``); a scenario: a fresh ``SimulatedNvml`` for it."""
    if scenario is None:
        import pynvml

        return pynvml
    from falcon_gpu.simulator.nvml.library import SimulatedNvml

    return SimulatedNvml(scenario)


class CFunctions:
    """The C functions of the NVML library that pynvml loaded, looked up once each: the real bindings'
    fast path (:mod:`falcon_gpu.sources.nvml.direct`) calls them with buffers it keeps, where pynvml's
    wrappers would build their ctypes structures in Python on every call.

    Looked up through pynvml's own ``_nvmlGetFunctionPointer`` (the handle ``nvmlInit`` opened, with
    pynvml's lock and cache), so this module opens no library of its own. Before ``nvmlInit`` there is
    no library yet: nothing is remembered and the caller takes pynvml's call this once."""

    __slots__ = ("_found", "_pointer")

    def __init__(self, pointer: Callable[[str], Any]) -> None:
        self._pointer = pointer
        self._found: dict[str, Any] = {}
        """Per C function name: its pointer, or None where the library lacks it."""

    def get(self, name: str) -> Any:
        """The C function ``name``; None where the library lacks it (or is not loaded yet)."""
        try:
            return self._found[name]
        except KeyError:
            pass
        import pynvml

        try:
            fn = self._pointer(name)
        except pynvml.NVMLError as exc:
            if getattr(exc, "value", None) != pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
                return None  # not initialised: ask again next time
            fn = None
        self._found[name] = fn
        return fn


def c_functions(lib: NvmlLibrary) -> CFunctions | None:
    """The seam between the two ways of calling NVML: the fast path (C functions with kept buffers)
    where ``lib`` is the real ``pynvml`` module and it offers ``_nvmlGetFunctionPointer``
    (nvidia-ml-py has for years: every wrapper of it calls it); None for the simulator (which stands in
    for pynvml at the Python level, so its pynvml-level calls are kept) and for a binding without it."""
    import pynvml

    if lib is not pynvml:
        return None
    pointer = getattr(pynvml, "_nvmlGetFunctionPointer", None)
    return None if pointer is None else CFunctions(pointer)
