"""The settings one plugin cycle reads, as a plain frozen dataclass: no pydantic.

Why it exists: falcon-agent forks the plugin every minute on every node, and
importing pydantic and pydantic-settings and building :class:`~falcon_gpu.settings.Settings`
costs about 200 ms, many times the interpreter's own start-up. The plugin validates
with the real model once, keeps here the values its cycle reads, and later runs
rebuild this from :mod:`falcon_gpu.settings_cache` without importing pydantic.

It holds no sinks, policies or ``listen`` endpoint (the plugin's output is its
stdout), so no secret a sink could carry (``headers``) is ever in it. Field names
and types are those of ``Settings``, so the runtime reads either the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from falcon_gpu.model.record import Record
from falcon_gpu.schemas import registry
from falcon_gpu.schemas.selection import MetricSelection

if TYPE_CHECKING:
    from falcon_gpu.settings import Settings

PATHS = (
    "proc_root",
    "kubelet_socket",
    "log_root",
    "docker_root",
    "containers_root",
    "passwd_file",
    "jobs_dir",
)
FLAGS = ("pod_requests", "pod_uid", "process_metrics")
STRING_LISTS = ("gpu_resources", "pod_labels")
CHOICES: dict[str, tuple[str, ...]] = {
    "schema_": registry.NAMES,
    "log_level": ("debug", "info", "warning", "error"),
    "kubernetes": ("auto", "on", "off"),
}


class ResolvedSettings(Record):
    """Immutable; a :class:`~falcon_gpu.model.record.Record` rather than a dataclass or a NamedTuple,
    because this module is on every plugin start and a Record builds nothing at import."""

    interval: float
    node: str
    labels: dict[str, str]
    proc_root: Path
    kubelet_socket: Path
    log_root: Path
    docker_root: Path
    containers_root: Path
    passwd_file: Path
    gpu_resources: list[str]
    pod_labels: list[str]
    pod_requests: bool
    pod_uid: bool
    process_metrics: bool
    schema_: str
    metrics: MetricSelection
    """The ``[metrics]`` table (:mod:`falcon_gpu.schemas.selection`): it applies to the plugin's items too."""
    jobs_dir: Path
    log_level: Literal["debug", "info", "warning", "error"]
    kubernetes: Literal["auto", "on", "off"]
    carbon_intensity: float | str | None
    """gCO2e per kWh, or a series name (:mod:`falcon_gpu.carbon`): what job records' emissions need."""
    explicit: frozenset[str]
    """Settings the user gave (``Settings.explicit``): the simulator lays out a host only for the others."""

    @classmethod
    def of(cls, settings: Settings) -> ResolvedSettings:
        """The plugin's part of validated settings (the one place that maps one to the other)."""
        values = {name: getattr(settings, name) for name in cls._fields}
        values["metrics"] = MetricSelection(settings.metrics.include, settings.metrics.exclude)
        return cls(**values)

    def model_copy(self, *, update: Mapping[str, Any]) -> ResolvedSettings:
        """As ``Settings.model_copy(update=…)``: the runtime points host paths at a simulated host."""
        return self._replace(**update)

    def to_json(self) -> dict[str, Any]:
        out = self._asdict()
        for name in PATHS:
            out[name] = str(out[name])
        out["explicit"] = sorted(self.explicit)
        out["metrics"] = {"include": list(self.metrics.include), "exclude": list(self.metrics.exclude)}
        return out

    @classmethod
    def from_json(cls, data: Any) -> ResolvedSettings:
        """The inverse of :meth:`to_json`; ValueError on anything it would not have written."""
        names = cls._fields
        if not isinstance(data, dict) or sorted(data) != sorted(names):
            raise ValueError("not the fields of this version")
        for name in names:
            _check(name, data[name])
        values: dict[str, Any] = {name: Path(data[name]) if name in PATHS else data[name] for name in names}
        values["interval"] = float(values["interval"])
        if isinstance(values["carbon_intensity"], int):
            values["carbon_intensity"] = float(values["carbon_intensity"])
        values["explicit"] = frozenset(values["explicit"])
        values["metrics"] = MetricSelection(data["metrics"]["include"], data["metrics"]["exclude"])
        return cls(**values)


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _check(name: str, value: Any) -> None:
    if name in PATHS or name == "node":
        ok = isinstance(value, str) and value != ""
    elif name in FLAGS:
        ok = isinstance(value, bool)
    elif name in STRING_LISTS or name == "explicit":
        ok = _is_strings(value)
    elif name in CHOICES:
        ok = value in CHOICES[name]
    elif name == "metrics":
        tables = cast(dict[str, Any], value) if isinstance(value, dict) else {}
        ok = sorted(tables) == ["exclude", "include"] and all(map(_is_strings, tables.values()))
    elif name == "carbon_intensity":
        ok = (
            value is None
            or isinstance(value, str)
            or (isinstance(value, int | float) and not isinstance(value, bool))
        )
    elif name == "interval":
        ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    else:  # labels
        labels = cast(dict[str, Any], value) if isinstance(value, dict) else None
        ok = labels is not None and all(isinstance(v, str) for v in labels.values())
    if not ok:
        raise ValueError(f"{name}: {value!r}")
