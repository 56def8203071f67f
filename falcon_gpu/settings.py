"""The agent's configuration (CONTRACT section 2), loaded once at start.

Sources, strongest first: command-line flags, ``FALCON_GPU_*`` environment
(nested with ``__``, lists as JSON), the TOML file, defaults. Unknown keys are
errors. :func:`load_settings` turns every problem into :class:`ConfigError`
whose message names the setting, so the CLI can exit 2 without a traceback.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Any, Literal

import tomllib
from pydantic import Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from falcon_gpu.sinks.config import SinkConfig, StdoutSinkConfig

DEFAULT_CONFIG_FILE = Path("/etc/falcon-gpu/falcon-gpu.toml")


class ConfigError(Exception):
    """A setting is invalid; the message names it and says why."""


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
    proc_root: Path = Path("/proc")
    kubelet_socket: Path = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
    log_root: Path = Path("/var/log")
    gpu_resources: list[str] = Field(
        default_factory=lambda: ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*"]
    )
    pod_labels: list[str] = Field(default_factory=list)
    process_metrics: bool = False
    schema_: Literal["falcon_gpu", "dcgm"] = Field("falcon_gpu", alias="schema")
    spool_dir: Path = Path("/var/lib/falcon-gpu/spool")
    spool_max_bytes: int = Field(268435456, ge=1 << 16)
    sinks: list[SinkConfig] = Field(default_factory=_default_sinks)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    listen: str = Field("", description="host:port of the /metrics, /healthz, /readyz endpoint; empty: off")

    @field_validator("listen")
    @classmethod
    def _listen_address(cls, value: str) -> str:
        if value:
            split_listen(value)  # raises ValueError naming what is wrong
        return value

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
        return (init_settings, env_settings, _TomlSource(settings_cls))


class _TomlSource(PydanticBaseSettingsSource):
    """Reads the TOML file chosen by :func:`load_settings` (class attribute, set per load)."""

    data: dict[str, Any] = {}

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self.data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.data)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ConfigError(f"--config: file {path} does not exist") from exc
    except PermissionError as exc:
        raise ConfigError(f"--config: cannot read {path}: permission denied") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--config: {path} is not valid TOML: {exc}") from exc


def _describe(err: ValidationError, source: str) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-after"))
        loc = loc.replace("schema_", "schema")
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown setting"
        given = e.get("input")
        shown = "" if e["type"] == "extra_forbidden" or isinstance(given, dict) else f" (got {given!r})"
        lines.append(f"setting {loc!r}: {msg}{shown}")
    return f"invalid configuration ({source}):\n  " + "\n  ".join(lines)


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Load settings; ``overrides`` are command-line values (None means not given).

    Raises ConfigError naming the setting when any source holds an invalid value.
    """
    if config_file is None and DEFAULT_CONFIG_FILE.exists():
        config_file = DEFAULT_CONFIG_FILE
    toml_data = _read_toml(config_file) if config_file else {}
    _TomlSource.data = toml_data
    given = {k: v for k, v in overrides.items() if v is not None}
    source = f"{config_file}, environment and flags" if config_file else "environment and flags"
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None
    except ValueError as exc:  # env values that are not JSON where JSON is needed
        found = re.search(r'field "([^"]+)"', str(exc))
        name = found.group(1).replace("schema_", "schema") if found else "?"
        raise ConfigError(
            f"invalid configuration ({source}):\n  setting {name!r}: FALCON_GPU_{name.upper()} "
            'must be JSON (a list or table), e.g. \'[{"type": "stdout"}]\''
        ) from None
    finally:
        _TomlSource.data = {}
