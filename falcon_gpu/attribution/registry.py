"""The attribution sources, in the order their answers are asked (the first answer wins).

Each line names a source module and a cheap test of whether the source may apply here now
(settings and ``stat`` calls only, see :mod:`falcon_gpu.attribution.presence`). A module is
imported only once its test passes: the plugin, forked every minute on a node without
Docker, Podman or the API server, does not pay for their code (kubelet's gRPC client, the
log scanner, the API client), and an agent whose kubelet starts later still picks it up on a
refresh (:mod:`falcon_gpu.attribution.deferred`).

Adding a source: write ``sources/<name>.py`` with a class following
:class:`~falcon_gpu.attribution.source.AttributionSource`, a
:class:`~falcon_gpu.attribution.source.SourceView` for its answers and a
``build(context)`` that returns it (or None where it is not configured),
then add its :class:`SourceEntry` line here. Nothing else is wired by hand: the attributor
refreshes it, reports its health in ``sources_ok`` and ``errors_total{kind=<name>}``,
and the join asks its view. See docs/ATTRIBUTION.md, "Adding a source".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

from falcon_gpu.attribution import presence
from falcon_gpu.attribution.settings import AttributionSettings
from falcon_gpu.attribution.source import AttributionSource, SourceContext

SourceFactory = Callable[[SourceContext], AttributionSource | None]

MISS_REFRESH_GAP = 5.0
"""At most one early refresh per this many seconds when a cycle meets an unknown container."""
KUBE_API_PERIOD = 60.0
"""Relist of this node's pods for labels; labels rarely change, and a list per minute is cheap."""


class SourceEntry:
    """One registry line; a :data:`SourceFactory` that imports its module only when it applies.

    ``name``, ``period`` and ``min_gap`` are the built source's own (a test holds them equal):
    the refresher is told them before the module is imported. A plain class, not a dataclass:
    building a dataclass at import costs more than all of this module (this is on every plugin
    start)."""

    __slots__ = ("applies", "min_gap", "module", "name", "period")

    def __init__(
        self,
        name: str,
        module: str,
        applies: Callable[[AttributionSettings], bool],
        min_gap: float | None = None,
        *,
        period: float | None = None,
    ) -> None:
        self.name = name
        self.module = module
        """Under ``falcon_gpu.attribution.sources``; its ``build(context)`` makes the source."""
        self.applies = applies
        """Whether the source may apply now (the source's own ``expected`` once built); imports
        nothing."""
        self.min_gap = min_gap
        self.period = period
        """Seconds between refreshes; None: the settings' ``refresh_period``."""

    def load(self) -> SourceFactory:
        module = importlib.import_module(f"falcon_gpu.attribution.sources.{self.module}")
        factory: SourceFactory = module.build
        return factory

    def __call__(self, context: SourceContext) -> AttributionSource | None:
        if self.applies(context.settings):
            return self.load()(context)
        from falcon_gpu.attribution.deferred import DeferredSource

        return DeferredSource(self, context)


SOURCES: tuple[SourceFactory, ...] = (
    # device plugins and DRA claims: one PodResources List
    SourceEntry("kubelet", "kubelet", presence.kubernetes_expected, MISS_REFRESH_GAP),
    SourceEntry("logs", "logs", presence.kubernetes_expected, MISS_REFRESH_GAP),
    SourceEntry("kube_api", "pod_labels", presence.kube_api_wanted, period=KUBE_API_PERIOD),
    SourceEntry("containers", "containers", presence.runtime_files_present, MISS_REFRESH_GAP),
    SourceEntry("passwd", "passwd", presence.passwd_present),  # Slurm job owners' names
)


def build_sources(
    context: SourceContext, factories: Sequence[SourceFactory] = SOURCES
) -> list[AttributionSource]:
    """Every configured source, in registry order."""
    built = (factory(context) for factory in factories)
    return [source for source in built if source is not None]
