"""What the agent renders for its outputs: each sink's Prometheus schema and the ``[metrics]``
selection, read from the settings once at start (the cycle only looks them up).

Here too the start-up warning for a ``[metrics]`` pattern that matches no family of the schemas
in use: a misspelt pattern would otherwise select nothing, silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from falcon_gpu.schemas.selection import MetricSelection

if TYPE_CHECKING:
    from falcon_gpu.settings import Settings
    from falcon_gpu.settings_resolved import ResolvedSettings

FALCON_SINKS = ("falcon_agent", "falcon_transfer")
"""Sink types whose output is Open-Falcon items (``stdout`` too with ``format = "falcon"``)."""


def selection_of(settings: Settings | ResolvedSettings) -> MetricSelection:
    metrics = settings.metrics
    if isinstance(metrics, MetricSelection):  # the plugin's, compiled when its settings were cached
        return metrics
    return MetricSelection(metrics.include, metrics.exclude, metrics.profile)


def sink_schemas(settings: Settings | ResolvedSettings) -> dict[str, str]:
    """Sink name -> the schema it asked for, where that is not the agent's ``schema``."""
    from falcon_gpu.settings_resolved import ResolvedSettings

    if isinstance(settings, ResolvedSettings):  # the plugin: no sinks, no listen
        return {}
    from falcon_gpu.sinks.config import SchemaKey  # pydantic: the settings were validated anyway

    found: dict[str, str] = {}
    for cfg in settings.sinks:
        if isinstance(cfg, SchemaKey) and cfg.schema_ and cfg.schema_ != settings.schema_:
            found[cfg.name] = cfg.schema_
    if settings.listen_schema and settings.listen_schema != settings.schema_:
        found["listen"] = settings.listen_schema  # the LatestCycle sink's name
    return found


def family_names_in_use(settings: Settings | ResolvedSettings) -> list[str]:
    """The families the agent's outputs can emit: those of every Prometheus schema a sink (or
    ``listen``) reads, and Open-Falcon's where an output sends items (the plugin always)."""
    from falcon_gpu.schemas import openfalcon, registry
    from falcon_gpu.settings_resolved import ResolvedSettings

    if isinstance(settings, ResolvedSettings):
        return list(openfalcon.NAMES)
    own = sink_schemas(settings)
    schemas: set[str] = set()
    falcon = False
    for cfg in settings.sinks:
        if cfg.type in FALCON_SINKS or (cfg.type == "stdout" and getattr(cfg, "format", "") == "falcon"):
            falcon = True
        else:
            schemas.add(own.get(cfg.name, settings.schema_))
    if settings.listen:
        schemas.add(own.get("listen", settings.schema_))
    names = [spec.name for schema in sorted(schemas) for spec in registry.specs(schema)]
    return names + list(openfalcon.NAMES) if falcon else names


def selection_warnings(settings: Settings | ResolvedSettings) -> list[str]:
    selection = selection_of(settings)
    if selection.everything:
        return []
    return selection.unmatched(family_names_in_use(settings))
