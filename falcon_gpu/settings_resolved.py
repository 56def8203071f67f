"""The validated settings one plugin cycle reads, without pydantic: ``Settings``' own values.

Why it exists: falcon-agent forks the plugin every minute on every node, and
importing pydantic and pydantic-settings and building :class:`~falcon_gpu.settings.Settings`
costs about 200 ms, many times the interpreter's own start-up. The plugin validates
with the real model once, keeps its values here, and later runs rebuild this from
:mod:`falcon_gpu.settings_cache` without importing pydantic.

The fields are ``Settings``' (no second list of them): every one but :data:`LEFT_OUT`, the
outputs a plugin has no use for (its output is its stdout), so no secret a sink or a policy
carries (``headers``, a webhook's URL) is ever in the cache. To mypy the class *is* a
``Settings`` (the attribute types are that model's); at run time it holds the values in its
instance dictionary, and a left-out setting is an AttributeError, never a silent default:
code that reads one first asks ``isinstance(settings, ResolvedSettings)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from falcon_gpu.schemas.selection import MetricSelection

if TYPE_CHECKING:
    from typing import Self

    from falcon_gpu.settings import Settings as _Settings
else:
    _Settings = object

LEFT_OUT = frozenset(
    ("sinks", "spool_dir", "spool_max_bytes", "policies", "listen", "listen_max_connections",
     "listen_schema", "web_config_file")
)  # fmt: skip
"""Settings the plugin does not carry: sinks, their spool, policies and the ``listen`` endpoint."""


class ResolvedSettings(_Settings):
    """Immutable; equal by value. ``metrics`` holds the compiled ``[metrics]`` table
    (:class:`~falcon_gpu.schemas.selection.MetricSelection`), ``explicit`` is a value."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        vars(self).update(values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; use model_copy(update=...)")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResolvedSettings) and vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def of(cls, settings: _Settings) -> ResolvedSettings:
        """The plugin's part of validated settings."""
        names = type(settings).model_fields.keys() - LEFT_OUT
        values: dict[str, Any] = {name: getattr(settings, name) for name in sorted(names)}
        m = settings.metrics
        values["metrics"] = MetricSelection(m.include, m.exclude, m.profile)
        values["explicit"] = settings.explicit
        return cls(values)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """As ``Settings.model_copy(update=…)``: the runtime points host paths at a simulated host."""
        return type(self)({**vars(self), **(update or {})})

    def to_json(self) -> dict[str, Any]:
        """The values as JSON, and which of them are paths."""
        values = dict(vars(self))
        paths = sorted(name for name, value in values.items() if isinstance(value, Path))
        for name in paths:
            values[name] = str(values[name])
        values["explicit"] = sorted(self.explicit)
        m = self.metrics
        values["metrics"] = {"include": list(m.include), "exclude": list(m.exclude), "profile": m.profile}
        return {"values": values, "paths": paths}

    @classmethod
    def from_json(cls, data: Any) -> ResolvedSettings:
        """The inverse of :meth:`to_json` (the cache checks that what it reads is what it wrote)."""
        values = dict(data["values"])
        for name in data["paths"]:
            values[name] = Path(values[name])
        values["explicit"] = frozenset(values["explicit"])
        m = values["metrics"]
        values["metrics"] = MetricSelection(m["include"], m["exclude"], m["profile"])
        return cls(values)
