"""Render one cycle lazily: each schema runs at most once, and only if a sink wants it.

The agent hands every sink the same :class:`RenderedCycle`, or for a sink with a ``schema`` of its
own (``listen_schema``, a sink table's ``schema``) its :meth:`~RenderedCycle.view` in that schema:
the views share the cycle's cache, so two sinks in ``dcgm`` cost one ``dcgm`` render, and a schema
no sink reads is never rendered. The cache is filled under a lock: sinks may read from threads of
their own, and "at most once" must hold for them too.

What a schema keeps from one cycle to the next (its previous families, its label tuples) belongs
to the agent's :class:`Renderers` (one :class:`SchemaRenderer` per schema asked for), which every
cycle of that agent renders with; a renderer renders one cycle at a time (its lock), since a sink's
thread may still be rendering a cycle when the next one comes.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import Final

from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.samples import FalconItem, PromBatch, PromGroup
from falcon_gpu.schemas import openfalcon, registry
from falcon_gpu.schemas.selection import EVERYTHING, MetricSelection

SWEEP_EVERY: Final = 16
"""Renders between two sweeps of a renderer's caches: an identity (a pod, a GPU) gone for 16 to 32
cycles has its label tuples dropped (:mod:`falcon_gpu.schemas.label_cache`)."""


class SchemaRenderer:
    """One Prometheus schema rendered by one owner, with what it keeps across cycles."""

    __slots__ = ("_lock", "_renders", "kept", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.kept = registry.new_caches(name)
        """What it keeps across cycles (its module's ``Caches``), used under :attr:`_lock`."""
        self._lock = threading.Lock()
        self._renders = 0

    def render(self, cycle: CycleData, selection: MetricSelection) -> PromBatch:
        with self._lock:
            self._renders += 1
            if self._renders % SWEEP_EVERY == 0:  # identities gone since the sweep before go
                self.kept.sweep()
            return registry.renderer(self.name)(cycle, selection, self.kept)


class Renderers:
    """An agent's :class:`SchemaRenderer` per schema, made on first use (bounded by the schemas)."""

    __slots__ = ("_by_schema", "_lock")

    def __init__(self) -> None:
        self._by_schema: dict[str, SchemaRenderer] = {}
        self._lock = threading.Lock()

    def of(self, schema: str) -> SchemaRenderer:
        found = self._by_schema.get(schema)
        if found is None:
            with self._lock:
                found = self._by_schema.get(schema)
                if found is None:
                    found = self._by_schema[schema] = SchemaRenderer(schema)
        return found


class RenderedCycle:
    """Implements :class:`falcon_gpu.sinks.base.Rendered` in the agent's ``schema``."""

    def __init__(
        self,
        cycle: CycleData,
        schema: str = registry.DEFAULT,
        selection: MetricSelection = EVERYTHING,
        renderers: Renderers | None = None,
    ) -> None:
        """``renderers``: the agent's (None: fresh ones, nothing kept from a previous cycle)."""
        self.cycle = cycle
        self.schema = schema
        self.selection = selection
        self.renderers = renderers if renderers is not None else Renderers()
        self._batches: dict[str, PromBatch] = {}
        self._views: dict[str, SchemaView] = {}
        self._lock = threading.Lock()

    @property
    def prometheus(self) -> PromBatch:
        return self.prometheus_in(self.schema)

    def prometheus_in(self, schema: str) -> PromBatch:
        """The cycle in the Prometheus schema ``schema`` (a name of :data:`registry.SCHEMAS`)."""
        found = self._batches.get(schema)
        if found is None:
            with self._lock:
                found = self._batches.get(schema)
                if found is None:
                    found = self._batches[schema] = self.renderers.of(schema).render(
                        self.cycle, self.selection
                    )
        return found

    def view(self, schema: str | None) -> RenderedCycle | SchemaView:
        """What a sink in ``schema`` gets (None or the agent's own schema: this cycle itself)."""
        if schema is None or schema == self.schema:
            return self
        found = self._views.get(schema)
        if found is None:
            found = self._views[schema] = SchemaView(self, schema)
        return found

    @cached_property
    def falcon(self) -> tuple[FalconItem, ...]:
        return openfalcon.render(self.cycle, self.selection)

    @cached_property
    def job_groups(self) -> tuple[PromGroup, ...]:
        """Pushgateway groups of the pods that finished a job this cycle (same names in every schema)."""
        from falcon_gpu.schemas import falcon_gpu_jobs

        return falcon_gpu_jobs.render(self.cycle.job_groups, self.cycle.snapshot.timestamp)


class SchemaView:
    """One cycle as a sink in another Prometheus schema sees it (:class:`falcon_gpu.sinks.base.Rendered`)."""

    __slots__ = ("_of", "schema")

    def __init__(self, of: RenderedCycle, schema: str) -> None:
        self._of = of
        self.schema = schema

    @property
    def cycle(self) -> CycleData:
        return self._of.cycle

    @property
    def prometheus(self) -> PromBatch:
        return self._of.prometheus_in(self.schema)

    @property
    def falcon(self) -> tuple[FalconItem, ...]:
        return self._of.falcon

    @property
    def job_groups(self) -> tuple[PromGroup, ...]:
        return self._of.job_groups
