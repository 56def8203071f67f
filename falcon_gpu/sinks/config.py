"""Settings of each sink type (the ``[[sinks]]`` tables of CONTRACT section 2).

One model per ``type``; pydantic picks the model by the ``type`` key and rejects
unknown keys, so a typo in a sink table exits 2 naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from falcon_gpu.delivery import headers as header_rules
from falcon_gpu.delivery.secrets import redact_url
from falcon_gpu.delivery.tls import check_ca_file, check_client_cert

MAX_DURATION = 86400.0  # CONTRACT section 2: every duration is > 0 and at most a day


def _duration(default: float, description: str) -> float:
    """A duration setting: seconds, > 0 and at most :data:`MAX_DURATION` (a larger one
    overflows the timers it ends up in and kills the sink's threads)."""
    return Field(default, gt=0, le=MAX_DURATION, description=description)


class _SinkBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""

    @model_validator(mode="after")
    def _default_name(self) -> _SinkBase:
        if not self.name:
            object.__setattr__(self, "name", getattr(self, "type", "sink"))
        return self


class StdoutSinkConfig(_SinkBase):
    type: Literal["stdout"]
    format: Literal["falcon", "prometheus", "json"] = "prometheus"


class NetworkSinkConfig(_SinkBase):
    """Keys every network sink takes: transport, batching, auth and TLS."""

    timeout: float = _duration(10.0, "seconds for one whole request, connect to last byte")
    batch_max_samples: int = Field(2000, ge=1, le=1_000_000)
    batch_max_age: float = _duration(1.0, "seconds a partial batch waits")
    retry_initial_delay: float = _duration(0.05, "first retry delay")
    retry_max_delay: float = _duration(30.0, "longest retry delay")
    queue_max_batches: int = Field(1000, ge=1, description="in-memory queue before the spool only")
    bearer_token_file: Path | None = None
    basic_auth_user: str | None = None
    basic_auth_password_file: Path | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    insecure_skip_verify: bool = False

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
    def _check_auth(self) -> NetworkSinkConfig:
        if self.bearer_token_file and (self.basic_auth_user or self.basic_auth_password_file):
            raise ValueError("use either bearer_token_file or basic_auth_*, not both")
        if bool(self.basic_auth_user) != bool(self.basic_auth_password_file):
            raise ValueError("basic_auth_user and basic_auth_password_file go together")
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("cert_file and key_file go together")
        if self.cert_file and self.key_file:
            check_client_cert(self.cert_file, self.key_file)
        return self


class _HttpSinkConfig(NetworkSinkConfig):
    """A sink that speaks HTTP to ``url``: checked here, so that a URL requests cannot use
    (no scheme, no host) exits 2 at start instead of dropping every batch as refused."""

    url: str

    @model_validator(mode="after")
    def _check_url(self) -> _HttpSinkConfig:
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


class FalconAgentSinkConfig(_HttpSinkConfig):
    type: Literal["falcon_agent"]
    url: str = "http://127.0.0.1:1988/v1/push"


class FalconTransferSinkConfig(NetworkSinkConfig):
    type: Literal["falcon_transfer"]
    address: str = "127.0.0.1:8433"

    @model_validator(mode="after")
    def _check_address(self) -> FalconTransferSinkConfig:
        host, sep, port = self.address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"address must be host:port, got {self.address!r}")
        return self


class PushgatewaySinkConfig(_HttpSinkConfig):
    type: Literal["pushgateway"]
    url: str = "http://127.0.0.1:9091"
    job: str = "falcon_gpu"
    gzip: bool = False
    delete_on_shutdown: bool = False


class RemoteWriteSinkConfig(_HttpSinkConfig):
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
