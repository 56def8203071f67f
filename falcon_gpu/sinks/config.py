"""Settings of each sink type (the ``[[sinks]]`` tables of CONTRACT section 2).

One model per ``type``; pydantic picks the model by the ``type`` key and rejects
unknown keys, so a typo in a sink table exits 2 naming it. Each model is put
together from the key groups its sink really reads: delivery (``_RetryKeys``,
``_QueueKeys``: what :mod:`falcon_gpu.delivery.settings` asks for) and transport
(``_TimeoutKey``, ``_HttpKeys``), so a key a sink would ignore (``ca_file`` on
``falcon_transfer``, ``batch_max_samples`` on ``pushgateway``) exits 2 too.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from falcon_gpu.delivery import headers as header_rules
from falcon_gpu.delivery.secrets import header_secrets, redact_url, url_secrets
from falcon_gpu.delivery.tls import check_ca_file, check_client_cert
from falcon_gpu.schemas import registry

MAX_DURATION = 86400.0  # CONTRACT section 2: every duration is > 0 and at most a day


def _duration(default: float, description: str) -> float:
    """A duration setting: seconds, > 0 and at most :data:`MAX_DURATION` (a larger one
    overflows the timers it ends up in and kills the sink's threads)."""
    return Field(default, gt=0, le=MAX_DURATION, description=description)


class _SinkBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""

    @field_validator("name")
    @classmethod
    def _directory_name(cls, name: str) -> str:
        """The name is the spool directory's (``<spool_dir>/<name>/``): it must stay one directory."""
        if "/" in name or "\\" in name or "\0" in name or name in (".", ".."):
            raise ValueError(
                f"{name!r} cannot name the sink's spool directory: no '/', '\\', NUL, '.' or '..'"
            )
        return name

    @model_validator(mode="after")
    def _default_name(self) -> _SinkBase:
        if not self.name:
            object.__setattr__(self, "name", getattr(self, "type", "sink"))
        return self


class SchemaKey(_SinkBase):
    """A sink that sends Prometheus families may take a schema of its own (None: the agent's
    ``schema``). The Open-Falcon sinks have one schema only, so their tables do not take the key."""

    schema_: str | None = Field(default=None, alias="schema", description="this sink's Prometheus schema")

    @field_validator("schema_", mode="before")
    @classmethod
    def _schema(cls, value: object) -> object:
        return registry.check_name(value) if isinstance(value, str) else value


class StdoutSinkConfig(SchemaKey):
    type: Literal["stdout"]
    format: Literal["falcon", "prometheus", "json"] = "prometheus"


class _RetryKeys(_SinkBase):
    """What both delivery paths read (:class:`falcon_gpu.delivery.settings.RetrySettings`)."""

    retry_initial_delay: float = _duration(0.05, "first retry delay")
    retry_max_delay: float = _duration(30.0, "longest retry delay")


class _QueueKeys(_RetryKeys):
    """What the queued path reads besides retry (:class:`~falcon_gpu.delivery.settings.QueueSettings`):
    every sink that spools; not Pushgateway, which keeps only the newest state."""

    batch_max_samples: int = Field(2000, ge=1, le=1_000_000)
    batch_max_age: float = _duration(1.0, "seconds a partial batch waits")
    queue_max_batches: int = Field(1000, ge=1, description="in-memory queue before the spool only")


class _TimeoutKey(_SinkBase):
    timeout: float = _duration(10.0, "seconds for one whole request, connect to last byte")


class _HttpKeys(_TimeoutKey):
    """The HTTP transport (:class:`~falcon_gpu.delivery.settings.HttpSettings`): ``url``, auth,
    headers and TLS. ``url`` is checked here, so that a URL requests cannot use (no scheme,
    no host) exits 2 at start instead of dropping every batch as refused."""

    url: str
    bearer_token_file: Path | None = None
    basic_auth_user: str | None = None
    basic_auth_password_file: Path | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    insecure_skip_verify: bool = False

    def secrets(self) -> tuple[list[str], list[Path]]:
        """What only the user knows, for the log redactor: header values, the URL's query values
        and password, and the secret files (their contents are read by the redactor)."""
        files = [f for f in (self.bearer_token_file, self.basic_auth_password_file) if f is not None]
        return header_secrets(self.headers) + url_secrets(self.url), files

    @field_validator("headers")
    @classmethod
    def _check_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        """A header requests would refuse to send exits 2 here, not every batch later."""
        for name, value in headers.items():
            problem = header_rules.name_problem(name) or header_rules.value_problem(name, value)
            if problem:
                raise ValueError(f"headers: {problem}")
        return headers

    @field_validator("ca_file")
    @classmethod
    def _check_ca_file(cls, path: Path | None) -> Path | None:
        if path is not None:
            check_ca_file(path)
        return path

    @model_validator(mode="after")
    def _check_auth(self) -> _HttpKeys:
        if self.bearer_token_file and (self.basic_auth_user or self.basic_auth_password_file):
            raise ValueError("use either bearer_token_file or basic_auth_*, not both")
        if bool(self.basic_auth_user) != bool(self.basic_auth_password_file):
            raise ValueError("basic_auth_user and basic_auth_password_file go together")
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("cert_file and key_file go together")
        if self.cert_file and self.key_file:
            check_client_cert(self.cert_file, self.key_file)
        return self

    @model_validator(mode="after")
    def _check_url(self) -> _HttpKeys:
        try:
            parts = urlsplit(self.url)
            port_ok = parts.port is None or parts.port > 0
        except ValueError:
            parts, port_ok = None, False
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
            # the URL may carry a password: never echo it as given
            shown = redact_url(self.url)
            raise ValueError(f"url must be an http:// or https:// URL with a host, got {shown!r}")
        return self


class FalconAgentSinkConfig(_QueueKeys, _HttpKeys):
    type: Literal["falcon_agent"]
    url: str = "http://127.0.0.1:1988/v1/push"


class FalconTransferSinkConfig(_QueueKeys, _TimeoutKey):
    """JSON-RPC over plain TCP: no URL, TLS, auth or headers (those keys exit 2 here)."""

    type: Literal["falcon_transfer"]
    address: str = "127.0.0.1:8433"

    @model_validator(mode="after")
    def _check_address(self) -> FalconTransferSinkConfig:
        host, sep, port = self.address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"address must be host:port, got {self.address!r}")
        return self


class PushgatewaySinkConfig(SchemaKey, _RetryKeys, _HttpKeys):
    """Latest state only: no batching or spool keys."""

    type: Literal["pushgateway"]
    url: str = "http://127.0.0.1:9091"
    job: str = "falcon_gpu"
    gzip: bool = False
    delete_on_shutdown: bool = False


class RemoteWriteSinkConfig(SchemaKey, _QueueKeys, _HttpKeys):
    type: Literal["remote_write"]
    url: str = "http://127.0.0.1:9090/api/v1/write"
    version: Literal[1, 2] = 1
    job: str = Field("falcon_gpu", min_length=1, description="the job label on every series")
    instance: str | None = Field(None, min_length=1, description="the instance label; default the node")
    stale_on_shutdown: bool = Field(
        True, description="mark every series stale at a clean shutdown (false for `run --once` from cron)"
    )


SinkConfig = Annotated[
    StdoutSinkConfig
    | FalconAgentSinkConfig
    | FalconTransferSinkConfig
    | PushgatewaySinkConfig
    | RemoteWriteSinkConfig,
    Field(discriminator="type"),
]


def keys_of(sink_type: str) -> list[str]:
    """The keys a sink type's table takes (for "did you mean" on a misspelt one)."""
    union = typing.get_args(SinkConfig)[0]
    for model in typing.get_args(union):
        if typing.get_args(model.model_fields["type"].annotation)[0] == sink_type:
            return [field.alias or name for name, field in model.model_fields.items()]
    return []


def types_taking(key: str) -> list[str]:
    """The sink types whose table takes ``key``: for the error when another type's table has it
    (``ca_file`` on ``falcon_transfer`` says where it would work, not just "unknown")."""
    union = typing.get_args(SinkConfig)[0]
    return [
        typing.get_args(model.model_fields["type"].annotation)[0]
        for model in typing.get_args(union)
        if key in {field.alias or name for name, field in model.model_fields.items()}
    ]


def sink_secrets(sinks: typing.Iterable[object]) -> tuple[list[str], list[Path]]:
    """Every secret value and secret file of the HTTP sinks among ``sinks``."""
    values: list[str] = []
    files: list[Path] = []
    for cfg in sinks:
        if isinstance(cfg, _HttpKeys):
            more, more_files = cfg.secrets()
            values += more
            files += more_files
    return values, files
