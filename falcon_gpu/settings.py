"""The agent's configuration (CONTRACT section 2), loaded once at start.

Sources, strongest first: command-line flags, ``FALCON_GPU_*`` environment
(nested with ``__``, lists as JSON), the TOML file, defaults. Unknown keys are
errors in every source. :func:`load_settings` turns every problem into
:class:`ConfigError` whose message names the setting (and the file or variable),
so the CLI can exit 2 without a traceback. Reading the sources is
:mod:`falcon_gpu.settings_sources`'s job.
"""

from __future__ import annotations

import os
import socket
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from falcon_gpu.carbon import check_carbon_intensity
from falcon_gpu.model.attribution import DEFAULT_JOB_LABELS
from falcon_gpu.model.text import encodable
from falcon_gpu.policies.config import PolicyConfig, check_policies
from falcon_gpu.schemas import registry
from falcon_gpu.schemas.extra_labels import check_extra_labels
from falcon_gpu.schemas.profiles import Profile
from falcon_gpu.settings_sources import (
    DEFAULT_CONFIG_FILE,
    ConfigError,
    config_file_in_use,
    nearest,
    read_env,
    read_toml,
)
from falcon_gpu.sinks.config import SinkConfig, StdoutSinkConfig, keys_of, types_taking

__all__ = ["DEFAULT_CONFIG_FILE", "ConfigError", "Settings", "load_settings", "split_listen"]

NAMED_VALUES = ("schema_", "listen_schema", "log_level", "kubernetes")
"""Settings whose values are names: matched case-insensitively (``--log-level INFO``)."""


def split_listen(value: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``; an empty host means every interface; port 0 picks a free
    one, which the start-up log names) as a bind address."""
    host, sep, port = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536 or "[" in host or "]" in host:
        raise ValueError(f"must be host:port with a port from 0 to 65535, e.g. '0.0.0.0:9410', got {value!r}")
    return host, int(port)


def _default_node() -> str:
    return os.environ.get("NODE_NAME") or socket.gethostname()


class MetricsTable(BaseModel):
    """``[metrics]``: ``profile`` (:mod:`falcon_gpu.schemas.profiles`) and fnmatch globs over family
    names, in every schema (Open-Falcon's too): ``include`` adds to the default profile's lean set
    (under ``full``: keeps only what it names), ``exclude`` applies after it
    (:mod:`falcon_gpu.schemas.selection`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: Profile = Field(default="default", description="default: the lean set; full: every family")
    include: list[str] = Field(default_factory=list, description="families added (full: kept); empty: none")
    exclude: list[str] = Field(default_factory=list, description="families dropped from those kept")

    @field_validator("include", "exclude")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        if any(not p for p in patterns):
            raise ValueError("an empty pattern matches nothing; remove it")
        return patterns


def _default_sinks() -> list[SinkConfig]:
    return [StdoutSinkConfig(type="stdout")]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="FALCON_GPU_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    interval: float = Field(30.0, gt=0, le=86400, description="seconds between cycles")
    node: str = Field(default_factory=_default_node, min_length=1)
    labels: dict[str, str] = Field(default_factory=dict)
    proc_root: Path = Path("/proc")
    kubelet_socket: Path = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
    log_root: Path = Path("/var/log")
    docker_root: Path = Path("/var/lib/docker")
    containers_root: Path = Path("/var/lib/containers")
    passwd_file: Path = Path("/etc/passwd")
    gpu_resources: list[str] = Field(
        default_factory=lambda: ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*"]
    )
    pod_labels: list[str] = Field(default_factory=list)
    job_labels: list[str] = Field(
        default_factory=lambda: list(DEFAULT_JOB_LABELS),
        description="pod labels that name a distributed job (the first one a pod has becomes job_name)",
    )
    pod_requests: bool = Field(False, description="read pods' GPU requests from the API server")
    pod_uid: bool = Field(False, description="add pod_uid to pod series")
    process_metrics: bool = False
    schema_: str = Field(registry.DEFAULT, alias="schema", description="the Prometheus schema of every sink")
    metrics: MetricsTable = Field(default_factory=MetricsTable)
    spool_dir: Path = Path("/var/lib/falcon-gpu/spool")
    spool_max_bytes: int = Field(268435456, ge=1 << 16)
    jobs_dir: Path = Field(Path("/var/lib/falcon-gpu/jobs"), description="per-pod job records (JSON lines)")
    advice_headroom: float = Field(
        0.2, ge=0.0, le=4.0, description="`advise`: room above a workload's p95 memory and SM (0.2 = 20 %)"
    )
    advice_window: float = Field(
        604800.0, gt=0, description="advice series: jobs that ended within this many seconds (default 7 days)"
    )
    sinks: list[SinkConfig] = Field(default_factory=_default_sinks)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    kubernetes: Literal["auto", "on", "off"] = Field(
        "auto", description="auto: attribute to pods when the kubelet socket or log dirs exist"
    )
    policies: list[PolicyConfig] = Field(default_factory=list)
    carbon_intensity: float | str | None = Field(
        None, description="gCO2e per kWh: a number, or the name of a series in the store the rules join"
    )

    listen: str = Field("", description="host:port of the /metrics, /healthz, /readyz endpoint; empty: off")
    listen_max_connections: int = Field(
        64,
        ge=1,
        le=4096,
        description="connections `listen` holds at once; past it the oldest unfinished "
        "request is dropped, or the newcomer refused",
    )
    listen_schema: str = Field("", description="the Prometheus schema `listen` serves; empty: `schema`")
    web_config_file: Path | None = Field(
        None, description="exporter-toolkit web configuration (TLS, basic auth, headers) for `listen`"
    )

    @field_validator("listen")
    @classmethod
    def _listen_address(cls, value: str) -> str:
        if value:
            split_listen(value)  # raises ValueError naming what is wrong
        return value

    @field_validator("web_config_file")
    @classmethod
    def _web_config_needs_listen(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is not None and not info.data.get("listen"):
            raise ValueError("applies to the 'listen' endpoint, which is not set")
        return value

    @field_validator("schema_")
    @classmethod
    def _schema(cls, value: str) -> str:
        return registry.check_name(value)

    @field_validator("listen_schema")
    @classmethod
    def _listen_schema(cls, value: str, info: ValidationInfo) -> str:
        if value and not info.data.get("listen"):
            raise ValueError("applies to the 'listen' endpoint, which is not set")
        return registry.check_name(value) if value else value

    @field_validator(*NAMED_VALUES, mode="before")
    @classmethod
    def _lower_names(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("job_labels")
    @classmethod
    def _job_labels(cls, names: list[str]) -> list[str]:
        if any(not name.strip() for name in names):
            raise ValueError("an empty label name names no job")
        return names

    @field_validator("labels")
    @classmethod
    def _extra_labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return check_extra_labels(labels)

    @field_validator("carbon_intensity", mode="before")
    @classmethod
    def _carbon_intensity(cls, value: Any) -> float | str | None:
        return check_carbon_intensity(value)

    @field_validator("policies", mode="before")
    @classmethod
    def _policies(cls, value: Any) -> Any:
        return check_policies(value)

    @field_validator("sinks")
    @classmethod
    def _unique_sink_names(cls, sinks: list[SinkConfig]) -> list[SinkConfig]:
        seen: set[str] = set()
        for sink in sinks:
            if sink.name in seen:
                raise ValueError(f"two sinks are named {sink.name!r}; give each a distinct name")
            seen.add(sink.name)
        return sinks

    @property
    def explicit(self) -> frozenset[str]:
        """Settings given by the user (not defaults): the simulator only lays out
        a host tree for paths the user did not set."""
        return frozenset(self.model_fields_set)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _EnvSource(settings_cls), _TomlSource(settings_cls))


def setting_fields() -> dict[str, Any]:
    """Every key as users write it (``schema``, not ``schema_``) → its annotation."""
    return {(f.alias or name): f.annotation for name, f in Settings.model_fields.items()}


class _EnvSource(PydanticBaseSettingsSource):
    """``FALCON_GPU_<KEY>`` for every key; an unknown ``FALCON_GPU_*`` variable raises ConfigError."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads every variable at once

    def __call__(self) -> dict[str, Any]:
        return read_env(setting_fields())


_TOML: ContextVar[dict[str, Any]] = ContextVar("falcon_gpu_toml")
"""The TOML file's values that :func:`load_settings` is loading in this thread: a context variable,
not a class attribute, so two loads at once (a test, a SIGHUP reload beside a start) never read each
other's file."""


class _TomlSource(PydanticBaseSettingsSource):
    """Reads the TOML file chosen by :func:`load_settings` (:data:`_TOML`, set per load)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return _TOML.get({}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_TOML.get({}))


def _sink_types() -> list[str]:
    return types_taking("type")


def _unknown(loc: tuple[Any, ...]) -> str:
    """ "unknown setting" with the nearest known key (as the environment's message has it), or
    for a sink key that another sink type takes, which ones do."""
    known: list[str] = []
    if len(loc) == 1:
        known = list(setting_fields())
    elif len(loc) == 4 and loc[0] == "sinks":
        elsewhere = types_taking(str(loc[3]))
        if elsewhere:
            return f"a {loc[2]} sink does not take it ({', '.join(elsewhere)} sinks do)"
        known = keys_of(str(loc[2]))
    hint = nearest(str(loc[-1]), known)
    return f"unknown setting; did you mean {hint!r}?" if hint else "unknown setting"


def _message(e: Any) -> str:
    """pydantic's message for one error, reworded where it would puzzle a user."""
    kind, given = e["type"], e.get("input")
    if kind == "extra_forbidden":
        return _unknown(e["loc"])
    if kind == "union_tag_invalid":
        expected = e["ctx"]["expected_tags"].replace("'", "")
        return f"sink type {e['ctx']['tag']!r} is not one of: {expected}"
    if kind == "union_tag_not_found":
        return f"each sink needs a type, one of: {', '.join(_sink_types())}"
    if kind == "list_type" and isinstance(given, dict):
        return "is a single table; write each entry as [[name]] (double brackets), not [name]"
    if kind == "value_error":  # our own validators' messages already say what was given
        return str(e["msg"]).removeprefix("Value error, ")
    shown = "" if isinstance(given, dict) else f" (got {given!r})"
    return f"{e['msg']}{shown}"


def _describe(err: ValidationError, source: str) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-after"))
        loc = loc.replace("schema_", "schema")
        message = _message(e)
        if e["type"] == "list_type" and isinstance(e.get("input"), dict):
            message = message.replace("name", loc)
        lines.append(f"setting {loc!r}: {message}")
    return f"invalid configuration ({source}):\n  " + "\n  ".join(lines)


def unusable_text(value: Any, where: str = "") -> str | None:
    """Why the first text in ``value`` (a settings dump) cannot be used, naming its setting; None if
    all can. A NUL character (no path, URL or label can hold it) and a lone surrogate (an environment
    variable's byte that is not UTF-8: no wire can encode it) would fail only later, in a sink or a
    file system call; the value itself is never shown (it may be a header's secret)."""
    if isinstance(value, dict):
        for key, item in value.items():
            found = unusable_text(key, where) or unusable_text(item, f"{where}.{key}" if where else str(key))
            if found:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = unusable_text(item, f"{where}.{i}")
            if found:
                return found
    elif isinstance(value, str | Path):
        text = str(value)
        if "\0" in text:
            return f"setting {where!r}: holds a NUL character"
        if not encodable(text):
            return (
                f"setting {where!r}: is not UTF-8 text (a byte that is not UTF-8, or a lone surrogate escape)"
            )
    return None


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Load settings; ``overrides`` are command-line values (None means not given).

    Raises ConfigError naming the setting when any source holds an invalid value.
    """
    config_file = config_file_in_use(config_file)
    token = _TOML.set(read_toml(config_file) if config_file else {})
    given = {k: v for k, v in overrides.items() if v is not None}
    source = f"{config_file}, environment and flags" if config_file else "environment and flags"
    try:
        settings = Settings(**given)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None
    finally:
        _TOML.reset(token)
    problem = unusable_text(settings.model_dump(by_alias=True))
    if problem:
        raise ConfigError(f"invalid configuration ({source}):\n  {problem}")
    return settings
