"""A strict, path-aware reader over parsed JSON, for the scenario parser.

Why not pydantic: the scenario format needs error messages that start with the
JSON path in the file (``gpus[1].ecc.bogus: unknown key``) and a few unions
("a number or a list of numbers") that read better hand-written. Every check
raises :class:`ScenarioError` naming the path; :meth:`Obj.done` rejects the keys
nobody asked for.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import Any


class ScenarioError(ValueError):
    """A scenario file is missing, not JSON, or does not match CONTRACT section 5.

    The message starts with the JSON path of the offending value (or the file name
    when the file itself is the problem) and says what was expected.
    """


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(value: Any) -> bool:
    """A finite JSON number that fits a float (JSON's ``NaN``, ``Infinity`` and a 400-digit
    integer are not readings: they would fail later, inside the simulated NVML)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _file_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one file name the simulator lays out; None when it can. A
    ``\\udcXX`` escape (XX from 80 to ff) stands for the raw byte XX, as Python's
    ``surrogateescape`` reads it: a scenario can lay out a name that is not UTF-8."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        return "must be one file name (not empty, '.' or '..'; no '/' or NUL)"
    try:
        os.fsencode(name)
    except UnicodeEncodeError:
        return "holds a lone surrogate that stands for no byte (only \\udc80-\\udcff do)"
    return None


class Obj:
    """A JSON object at ``path`` whose keys are read one by one, then checked with :meth:`done`."""

    def __init__(self, value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise ScenarioError(f"{path or '<top>'}: expected an object, got {_show(value)}")
        self._data: dict[str, Any] = value
        self._path = path
        self._seen: set[str] = set()

    def sub(self, key: str) -> str:
        return f"{self._path}.{key}" if self._path else key

    def has(self, key: str) -> bool:
        return key in self._data and self._data[key] is not None

    def raw(self, key: str) -> Any:
        self._seen.add(key)
        return self._data.get(key)

    def done(self) -> None:
        """Raises ScenarioError for the first key that no reader asked for."""
        for key in self._data:
            if key not in self._seen:
                raise ScenarioError(f"{self.sub(key)}: unknown key")

    # -- scalars ---------------------------------------------------------
    def string(self, key: str, default: str | None = None) -> str:
        value = self.raw(key)
        if value is None and default is not None:
            return default
        if not isinstance(value, str):
            what = "missing" if value is None else f"got {_show(value)}"
            raise ScenarioError(f"{self.sub(key)}: expected a string, {what}")
        return value

    def opt_string(self, key: str) -> str | None:
        if self.has(key):
            return self.string(key)
        self.raw(key)
        return None

    def integer(self, key: str, default: int | None = None) -> int:
        value = self.raw(key)
        if value is None and default is not None:
            return default
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            what = "missing" if value is None else f"got {_show(value)}"
            raise ScenarioError(f"{self.sub(key)}: expected an integer, {what}")
        return value

    def opt_integer(self, key: str) -> int | None:
        if self.has(key):
            return self.integer(key)
        self.raw(key)
        return None

    def boolean(self, key: str, default: bool | None = None) -> bool:
        value = self.raw(key)
        if value is None and default is not None:
            return default
        if not isinstance(value, bool):
            what = "missing" if value is None else f"got {_show(value)}"
            raise ScenarioError(f"{self.sub(key)}: expected true or false, {what}")
        return value

    def series(self, key: str) -> tuple[float, ...] | None:
        """A number, or a non-empty list of numbers (one per cycle); None when absent."""
        value = self.raw(key)
        if value is None:
            return None
        if _is_number(value):
            return (float(value),)
        if isinstance(value, list) and value and all(_is_number(v) for v in value):
            return tuple(float(v) for v in value)
        raise ScenarioError(f"{self.sub(key)}: expected a number or a list of numbers, got {_show(value)}")

    # -- containers ------------------------------------------------------
    def items(self, key: str) -> Iterator[tuple[Any, str]]:
        """Each element of an optional list, with its path."""
        value = self.raw(key)
        if value is None:
            return
        if not isinstance(value, list):
            raise ScenarioError(f"{self.sub(key)}: expected a list, got {_show(value)}")
        for i, item in enumerate(value):
            yield item, f"{self.sub(key)}[{i}]"

    def strings(self, key: str) -> tuple[str, ...]:
        out = []
        for item, path in self.items(key):
            if not isinstance(item, str):
                raise ScenarioError(f"{path}: expected a string, got {_show(item)}")
            out.append(item)
        return tuple(out)

    def file_names(self, key: str) -> tuple[str, ...]:
        """Like :meth:`strings`, each one file name (see :func:`_file_name_problem`)."""
        out = self.strings(key)
        for i, name in enumerate(out):
            problem = _file_name_problem(name)
            if problem:
                raise ScenarioError(f"{self.sub(key)}[{i}]: {problem}, got {_show(name)}")
        return out

    def file_name(self, key: str) -> str:
        """Like :meth:`string`, one file name (see :func:`_file_name_problem`)."""
        name = self.string(key)
        problem = _file_name_problem(name)
        if problem:
            raise ScenarioError(f"{self.sub(key)}: {problem}, got {_show(name)}")
        return name

    def objects(self, key: str) -> Iterator[Obj]:
        for item, path in self.items(key):
            yield Obj(item, path)

    def obj(self, key: str) -> Obj | None:
        value = self.raw(key)
        return None if value is None else Obj(value, self.sub(key))

    def mapping(self, key: str) -> Iterator[tuple[str, Any, str]]:
        """Each entry of an optional object, as (key, value, path)."""
        value = self.raw(key)
        if value is None:
            return
        if not isinstance(value, dict):
            raise ScenarioError(f"{self.sub(key)}: expected an object, got {_show(value)}")
        for name, item in value.items():
            yield name, item, f"{self.sub(key)}.{name}"
