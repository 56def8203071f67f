"""The Prometheus schemas by name: the one table that maps ``schema`` (global, per sink,
``listen_schema``) to the module that renders it.

Each module is imported on first use (the Open-Falcon plugin never imports one) and has
``SPECS`` (its families, in order: what ``[metrics]`` patterns are checked against), ``Caches`` (what
a renderer keeps across cycles, :mod:`falcon_gpu.schemas.kept`) and
``render(cycle: CycleData, selection: MetricSelection, kept: Caches) -> PromBatch``. Adding a schema
is one entry here; the settings take every name of this table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from falcon_gpu.model.cycle import CycleData
    from falcon_gpu.model.samples import PromBatch
    from falcon_gpu.schemas.builder import MetricSpec
    from falcon_gpu.schemas.kept import SchemaCaches
    from falcon_gpu.schemas.selection import MetricSelection

SCHEMAS: Mapping[str, str] = {
    "falcon_gpu": "falcon_gpu.schemas.falcon_gpu",
    "dcgm": "falcon_gpu.schemas.dcgm",
    "nvidia_smi": "falcon_gpu.schemas.nvidia_smi",
}
"""``schema`` -> the module holding its ``SPECS``, ``Caches`` and ``render(cycle, selection, kept)``."""
NAMES: tuple[str, ...] = tuple(SCHEMAS)
DEFAULT = "falcon_gpu"

Render = Callable[["CycleData", "MetricSelection", "SchemaCaches"], "PromBatch"]


def check_name(name: str) -> str:
    """``name`` if it is a schema (lower-cased); ValueError listing the schemas otherwise."""
    if name.lower() not in SCHEMAS:
        raise ValueError(f"must be one of {', '.join(map(repr, NAMES))}, got {name!r}")
    return name.lower()


def renderer(name: str) -> Render:
    """The schema's ``render``, looked up on its module at each call (a test may wrap it)."""
    render: Render = importlib.import_module(SCHEMAS[name]).render
    return render


def new_caches(name: str) -> SchemaCaches:
    """A fresh set of what a renderer of the schema keeps across cycles (its module's ``Caches``)."""
    kept: SchemaCaches = importlib.import_module(SCHEMAS[name]).Caches()
    return kept


def specs(name: str) -> tuple[MetricSpec, ...]:
    found: tuple[MetricSpec, ...] = importlib.import_module(SCHEMAS[name]).SPECS
    return found
