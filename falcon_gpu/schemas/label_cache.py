"""Label tuples kept across cycles, per identity (a GPU, a MIG instance, a link...).

The same series come back every cycle under the same labels, so building their label tuples anew
each cycle (and filtering empty values out of each, :func:`~falcon_gpu.schemas.builder.without_empty`)
is work whose result never changes while the identity holds. Kept here, a tuple is built once per
identity; a changed identity (a new UUID, driver version, node label...) is a new key, so a new tuple.
Reusing the same tuple object also makes the Prometheus encoder's per-series cache hit by identity
(:mod:`falcon_gpu.sinks.encoding.prom_text`): equal-and-identical keys compare at once.

Owned by the renderer that uses it: a schema module declares the caches it needs as a small class
(``AgentLabels``, ``PodLabels``...), and each :class:`~falcon_gpu.schemas.render.SchemaRenderer`
holds one of each, passed in to the functions that render, so two agents (two tests) in one process
never share one, and one render at a time uses it (the renderer's lock).

Bounded by what it keys: the GPUs, instances, links, pods of a node. At :attr:`LabelCache.limit`
entries the cache starts again empty, so identities that come and go (pods on a busy node) cannot
grow it without bound.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Final, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

MAX_IDENTITIES: Final = 4096
"""Per cache: far above the GPUs, instances and links of a node, well below what memory notices."""


class LabelCache(Generic[K, V]):
    """``key`` -> ``build(key)``, built once per key, at most ``limit`` keys."""

    __slots__ = ("_build", "_entries", "limit")

    def __init__(self, build: Callable[[K], V], limit: int = MAX_IDENTITIES) -> None:
        self._build = build
        self._entries: dict[K, V] = {}
        self.limit = limit

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V:
        found = self._entries.get(key)
        if found is None:
            entries = self._entries
            if len(entries) >= self.limit:
                entries = self._entries = {}
            found = entries[key] = self._build(key)
        return found
