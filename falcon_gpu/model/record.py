"""``Record``: the base of the model's plain value classes; how the model's values are declared, and why.

Every class in :mod:`falcon_gpu.model` is a value: built once by the stage that produces it and
only read after that (by the schemas, the sinks, the scrape endpoint, other threads). How they
are declared is set by start-up cost: the Open-Falcon plugin is a new process every minute, and
on Python 3.11 ``@dataclass`` generates and compiles each class's methods at import (about 1 ms a
class; the model's 25 were a fifth of the plugin's start). So:

- most are ``typing.NamedTuple`` (about a fifth of a dataclass to build; read-only at run time
  and to mypy, ``==``, ``hash``, ``repr`` and a typed ``_replace`` given);
- the few that a NamedTuple does not fit — built by keyword thousands of times a cycle
  (``Series``, ``PodUsage``, ``ProcessUsage``: a NamedTuple's keyword call is slower than a plain
  ``__init__``), with a mutable default (``DeviceReading.xid_counts``, ``HealthReport``,
  ``Attribution.sources_ok``), or too wide for a cheap NamedTuple (``DeviceReading``'s 46 fields) —
  are plain classes with ``__slots__`` and a written ``__init__`` on this base, whose fields are
  ``Final`` (``self.x: Final = x``), so ``mypy --strict`` (CI) refuses an assignment to one as
  ``@dataclass(frozen=True)`` would at run time. A frozen dataclass sets each field through
  ``object.__setattr__``, about ten times a plain store; that run-time check is left out.

The base gives those plain classes what the model's users need of a value, written once here
rather than generated per class: ``_fields`` and ``_replace`` (the NamedTuple spellings, so a
caller changes a copy the same way whatever the class), and equality, hashing and ``repr`` by
field values (as a frozen dataclass: only an instance of the same class is equal).
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

R = TypeVar("R", bound="Record")


class Record:
    """A slotted value; a subclass sets ``__slots__ = _fields = (...)`` and writes ``__init__``."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    def _replace(self: R, **changes: Any) -> R:
        """A copy with ``changes``; an unknown field name is a TypeError, as for a NamedTuple."""
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        return type(self)(**values)

    def _asdict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._fields}

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record) or type(other) is not type(self):
            return NotImplemented
        return self is other or self._values() == other._values()

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({inner})"
