"""Import pynvml without ``ctypes.util`` (plugin start-up, issue 9).

pynvml does ``from ctypes.util import find_library`` at import and never calls it (it loads
``libnvidia-ml.so.1`` by name). ``ctypes.util`` imports ``shutil``, ``subprocess`` and
``tempfile`` (with ``bz2``, ``lzma``, ``locale``, ``signal``, ``selectors``, ``random``): about 14 ms
of every plugin start, a tenth of it, that nothing on the plugin's path uses. :func:`import_pynvml`
imports pynvml with a stand-in ``ctypes.util`` in ``sys.modules`` for that one import, and takes it
out again, so any later ``import ctypes.util`` gets the real module. The stand-in's
``find_library`` (what pynvml keeps) and any other name a newer pynvml might take from it load the
real module on first use, so behaviour does not change, only when the cost is paid.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

_NAME = "ctypes.util"


def _real() -> ModuleType:
    """The real ``ctypes.util`` (imported now if it was not yet)."""
    if isinstance(sys.modules.get(_NAME), _Deferred):
        del sys.modules[_NAME]
    __import__(_NAME)
    return sys.modules[_NAME]


def _find_library(name: str) -> str | None:
    found: str | None = _real().find_library(name)
    return found


class _Deferred(ModuleType):
    """The stand-in: ``find_library`` defers to the real one; any other name loads the real module."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system asks for ``__path__`` & co.: a plain module
            raise AttributeError(name)
        return getattr(_real(), name)


def import_pynvml() -> None:
    """Import pynvml (a no-op when it is imported already or ``ctypes.util`` is loaded anyway)."""
    if "pynvml" in sys.modules or _NAME in sys.modules:
        return
    stand_in = _Deferred(_NAME)
    stand_in.find_library = _find_library  # type: ignore[attr-defined]
    sys.modules[_NAME] = stand_in
    try:
        import pynvml  # noqa: F401
    finally:
        if sys.modules.get(_NAME) is stand_in:
            del sys.modules[_NAME]
