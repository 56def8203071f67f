"""``Record``: what :class:`~falcon_gpu.model.snapshot.DeviceReading` still inherits, until its
fields come from the reading table as a ``msgspec.Struct`` like every other value (issue 23); then
this module goes.

A subclass writes its own ``__slots__ = _fields = (...)`` and ``__init__`` (``self.x: Final = x``:
read-only to mypy). This base gives it what a frozen dataclass would: ``==``, ``hash`` and ``repr``
by the field values (only an instance of the same class is equal), and the NamedTuple spellings
``_replace`` and ``_asdict``.
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from typing import TypeVar

    R = TypeVar("R", bound="Record")


class Record:
    """A slotted value written by hand (see the module docstring)."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]]
    _values: ClassVar[Any]
    """The field values as one tuple (``operator.attrgetter``: one C call for ``==`` and ``hash``)."""

    def __init_subclass__(cls) -> None:
        cls._values = staticmethod(attrgetter(*cls._fields))

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
        return self is other or bool(values(self) == values(other))

    def __hash__(self) -> int:
        return hash((type(self), type(self)._values(self)))

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({inner})"
