"""``Record``: how value classes are declared: read-only to the type checker, nothing generated at import.

Every class in :mod:`falcon_gpu.model` (and the small values of ``readings/`` and ``attribution/``)
is a value: built once by the stage that produces it and only read after that (by the schemas, the
sinks, the scrape endpoint, other threads). How they are declared is set by start-up cost: the
Open-Falcon plugin is a new process every minute, and on Python 3.11 ``@dataclass`` generates and
compiles each class's methods at import (about 1 ms a class); a ``typing.NamedTuple`` still
compiles its ``__new__`` (measured 0.82 M instructions a 6-field class, against 0.13 M for a plain
slotted class: ``docs/BENCHMARKS.md``, "Plugin start-up", third cut). So a value class is

    class PolicyStatus(Record):
        policy: str
        gpu_uuid: str
        violating: bool = False

and the metaclass turns its annotations into ``__slots__`` and ``_fields`` (its defaults into
``_defaults``); nothing is compiled. One ``__init__``, written once here, takes the fields by
position or keyword as a dataclass would; ``==``, ``hash`` and ``repr`` go by the field values
(only an instance of the same class is equal, as for a frozen dataclass), and ``_fields``,
``_replace`` and ``_asdict`` have the NamedTuple spellings. ``dataclass_transform(frozen_default=True)``
tells ``mypy --strict`` (CI) the signature and that every field is read-only, so an assignment to
one is a type error, which ``@dataclass(frozen=True)`` checked at run time through
``object.__setattr__`` (about ten times a plain store).

A class built more than once or twice a cycle (per GPU, process, pod or series: ``Series``,
``PodUsage``, ``NvlinkErrors``; the generic ``__init__`` is 2-5x slower to call) or with a mutable default
(``DeviceReading.xid_counts``) writes its own ``__slots__ = _fields = (...)`` and ``__init__``
(``self.x: Final = x``: read-only to mypy as well); the metaclass then leaves it alone. A mutable
default in the annotated form is refused at class creation, as by a dataclass.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # a TypeVar bound by name builds a ForwardRef, whose compile() is ~10 M instructions
    from typing import TypeVar

    R = TypeVar("R", bound="Record")

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # Python 3.10: the marker only informs type checkers, which read it from 3.11 on

    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda decorated: decorated


_CLASS_VARS = ("ClassVar", "typing.ClassVar")
"""Annotations of a class attribute, not a field (strings: ``from __future__ import annotations``)."""


class _RecordMeta(type):
    """Slots, field names and defaults from the annotations; no code generated."""

    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> _RecordMeta:
        if "__slots__" not in ns:
            annotations = ns.get("__annotations__", {})
            fields = tuple(f for f, t in annotations.items() if not str(t).startswith(_CLASS_VARS))
            defaults = {f: ns.pop(f) for f in fields if f in ns}
            for f, value in defaults.items():
                if isinstance(value, list | dict | set):
                    raise ValueError(f"{name}.{f}: a mutable default would be shared; write __init__")
            missing = [f for f in fields if f not in defaults]
            if missing and fields.index(missing[-1]) >= len(missing):
                raise TypeError(f"{name}.{missing[-1]}: a field without a default after one with")
            ns["__slots__"] = ns["_fields"] = fields
            ns["_defaults"] = defaults
        ns["_values"] = staticmethod(_getter(ns.get("_fields", ())))
        return super().__new__(mcs, name, bases, ns)


def _getter(fields: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    if len(fields) > 1:
        return attrgetter(*fields)
    if fields:
        one = attrgetter(fields[0])
        return lambda r: (one(r),)
    return lambda r: ()


@dataclass_transform(frozen_default=True)
class Record(metaclass=_RecordMeta):
    """A slotted value (see the module docstring)."""

    __slots__ = ("_hash",)
    """``_hash``: the hash, worked out on first use (a value never changes; records key the label
    caches and are looked up several times a GPU and cycle). Records are never pickled: a hash kept
    across processes would be wrong (string hashes are per process)."""
    _fields: ClassVar[tuple[str, ...]]
    _defaults: ClassVar[dict[str, Any]] = {}
    _values: ClassVar[Callable[[Any], tuple[Any, ...]]]
    """The field values as one tuple (``operator.attrgetter``: one C call for ``==`` and ``hash``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields = self._fields
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__}() takes {len(fields)} values, {len(args)} given")
        for name, value in zip(fields, args, strict=False):  # fewer args: the rest below
            setattr(self, name, value)
        if len(args) < len(fields):
            defaults = self._defaults
            for name in fields[len(args) :]:
                if name in kwargs:
                    setattr(self, name, kwargs.pop(name))
                elif name in defaults:
                    setattr(self, name, defaults[name])
                else:
                    raise TypeError(f"{type(self).__name__}() missing the value of {name!r}")
        if kwargs:
            raise TypeError(
                f"{type(self).__name__}() got an unexpected or repeated value {next(iter(kwargs))!r}"
            )

    def _replace(self: R, **changes: Any) -> R:
        """A copy with ``changes``; an unknown field name is a TypeError, as for a NamedTuple."""
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        cls: Any = type(self)
        out: R = cls(**values)
        return out

    def _asdict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._fields}

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        values = type(self)._values
        return self is other or values(self) == values(other)

    def __hash__(self) -> int:
        hashed: int | None = getattr(self, "_hash", None)
        if hashed is None:
            hashed = hash((type(self), type(self)._values(self)))
            object.__setattr__(self, "_hash", hashed)
        return hashed

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({inner})"
