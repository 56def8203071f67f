"""The attribution sources, in the order their answers are asked (the first answer wins).

Adding a source: write ``sources/<name>.py`` with a class following
:class:`~falcon_gpu.attribution.source.AttributionSource`, a
:class:`~falcon_gpu.attribution.source.SourceView` for its answers and a
``build(context)`` that returns it (or None where it is not configured),
then add that ``build`` here. Nothing else is wired by hand: the attributor
refreshes it, reports its health in ``sources_ok`` and ``errors_total{kind=<name>}``,
and the join asks its view. See docs/ATTRIBUTION.md, "Adding a source".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from falcon_gpu.attribution.source import AttributionSource, SourceContext
from falcon_gpu.attribution.sources import containers, kubelet, logs, passwd, pod_labels

SourceFactory = Callable[[SourceContext], AttributionSource | None]

SOURCES: tuple[SourceFactory, ...] = (
    kubelet.build,  # device plugins and DRA claims: one PodResources List
    logs.build,
    pod_labels.build,
    containers.build,
    passwd.build,  # Slurm job owners' names
)


def build_sources(
    context: SourceContext, factories: Sequence[SourceFactory] = SOURCES
) -> list[AttributionSource]:
    """Every configured source, in registry order."""
    built = (factory(context) for factory in factories)
    return [source for source in built if source is not None]
