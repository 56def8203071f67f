"""Import a module without a stdlib module it imports but does not use (plugin start-up, issue 9).

Three imports on the plugin's path pay for a module only to bind one function they never call there:

- pynvml does ``from ctypes.util import find_library`` and never calls it (it loads
  ``libnvidia-ml.so.1`` by name); ``ctypes.util`` imports ``shutil``, ``subprocess`` and
  ``tempfile`` (with ``bz2``, ``lzma``, ``locale``, ``signal``, ``selectors``, ``random``): about
  14 ms of every plugin start;
- ``logging`` does ``import traceback``, used only to format an exception or a stack (which a
  plugin run that goes well never does); ``traceback`` imports ``linecache`` (``tokenize``) and
  ``textwrap``: about 5 ms;
- ``pathlib`` (Python 3.11) does ``from urllib.parse import quote_from_bytes`` for
  ``Path.as_uri()``, which nothing here calls; ``urllib.parse`` imports ``ipaddress``: about 4 ms.

:func:`import_deferring` imports the module with a stand-in for the other in ``sys.modules`` for
that one import, and takes it out again, so any later ``import`` of it gets the real module. The
stand-in's functions (what the module keeps) and any other name taken from it load the real module
on first use, so behaviour does not change, only when (and whether) the cost is paid.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


def _real(name: str) -> ModuleType:
    """The real module ``name`` (imported now if it was not yet)."""
    if isinstance(sys.modules.get(name), _Deferred):
        del sys.modules[name]
    __import__(name)
    return sys.modules[name]


class _Deferred(ModuleType):
    """The stand-in: any name it does not define loads the real module and answers the real one's."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system asks for ``__path__`` & co.: a plain module
            raise AttributeError(name)
        return getattr(_real(self.__name__), name)


def _deferring(module: str, name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(_real(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``{module}.{name}``, imported on first use."
    return call


def import_deferring(module: str, deferred: str, names: tuple[str, ...]) -> None:
    """Import ``module`` with ``deferred`` standing in (``names``: the functions it takes from it). A
    plain import where ``module`` is imported already or ``deferred`` is loaded anyway."""
    if module in sys.modules or deferred in sys.modules:
        __import__(module)
        return
    stand_in = _Deferred(deferred)
    for name in names:
        setattr(stand_in, name, _deferring(deferred, name))
    sys.modules[deferred] = stand_in
    try:
        __import__(module)
    finally:
        if sys.modules.get(deferred) is stand_in:
            del sys.modules[deferred]


def import_pynvml() -> None:
    """pynvml without ``ctypes.util`` (before anything else imports it)."""
    import_deferring("pynvml", "ctypes.util", ("find_library",))


def import_logging() -> None:
    """logging without ``traceback`` (before anything else imports it): logging binds the module and
    calls it only to print an exception or a stack, which then loads it."""
    import_deferring("logging", "traceback", ())


def import_pathlib() -> None:
    """pathlib without ``urllib.parse`` (before anything else imports it)."""
    import_deferring("pathlib", "urllib.parse", ("quote_from_bytes",))
