"""Label tuples kept across cycles, per identity (a GPU, a MIG instance, a link...).

The same series come back every cycle under the same labels, so building their label tuples anew
each cycle (and filtering empty values out of each, :func:`~falcon_gpu.schemas.builder.without_empty`)
is work whose result never changes while the identity holds. Kept here, a tuple is built once per
identity; a changed identity (a new UUID, driver version, node label...) is a new key, so a new tuple.
Reusing the same tuple object also makes the Prometheus encoder's per-series cache hit by identity
(:mod:`falcon_gpu.sinks.encoding.prom_text`): equal-and-identical keys compare at once.

Owned by the renderer that uses it: a schema module declares the caches it needs as a small class
(:class:`Kept`: ``AgentLabels``, ``PodLabels``...), and each
:class:`~falcon_gpu.schemas.render.SchemaRenderer` holds one of each, passed in to the functions that
render, so two agents (two tests) in one process never share one, and one render at a time uses it
(the renderer's lock).

Bounded by what it keys, with no size limit: the renderer sweeps its caches every few cycles
(:meth:`LabelCache.sweep`), and a sweep drops every identity that no render asked for since the
sweep before (a pod that went, a GPU that was replaced). So a cache holds the node's identities of
the last two sweep periods, whatever their number. A lookup that hits costs one dict look-up, as
before; after a sweep, each identity's first lookup moves it back (one more).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LabelCache(Generic[K, V]):
    """``key`` -> ``build(key)``, built once per key; :meth:`sweep` drops the keys not asked for
    since the sweep before. Values are never None."""

    __slots__ = ("_build", "_entries", "_older")

    def __init__(self, build: Callable[[K], V]) -> None:
        self._build = build
        self._entries: dict[K, V] = {}
        """The keys asked for since the last sweep."""
        self._older: dict[K, V] = {}
        """The keys of the period before, not asked for since: dropped at the next sweep."""

    def __len__(self) -> int:
        return len(self._entries) + len(self._older)

    def get(self, key: K) -> V:
        found = self._entries.get(key)
        if found is None:
            found = self._older.pop(key, None)
            if found is None:
                found = self._build(key)
            self._entries[key] = found
        return found

    def values(self) -> Iterator[V]:
        """Every value held (for an owner whose values keep caches of their own to sweep)."""
        yield from self._entries.values()
        yield from self._older.values()

    def sweep(self) -> None:
        """Start a new period: what was not asked for during the last one goes."""
        self._older, self._entries = self._entries, {}


class Kept:
    """A group of caches owned together (a schema's, a GPU's): :meth:`sweep` sweeps each of its
    slots that can be swept (a :class:`LabelCache`, another :class:`Kept`), so a cache added to a
    group is swept without being named twice."""

    __slots__ = ()

    def sweep(self) -> None:
        for cls in type(self).__mro__:
            for name in getattr(cls, "__slots__", ()):
                sweep = getattr(getattr(self, name, None), "sweep", None)
                if sweep is not None:
                    sweep()
