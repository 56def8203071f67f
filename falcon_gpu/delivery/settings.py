"""The settings the delivery stages read, as protocols.

Delivery never imports the sinks' settings models (``falcon_gpu.sinks.config``
imports delivery's checks, so the reverse would be a package cycle): a sink's
settings model satisfies these by having the fields. Each protocol names only
what its stage reads, so a sink type whose model lacks a key (``falcon_transfer``
has no ``headers``) cannot be wired to a stage that needs it: mypy says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class RetrySettings(Protocol):
    """What the retry and counting stage reads (both delivery paths)."""

    @property
    def name(self) -> str: ...

    @property
    def retry_initial_delay(self) -> float: ...

    @property
    def retry_max_delay(self) -> float: ...


class QueueSettings(RetrySettings, Protocol):
    """What the queued path reads besides retry: the memory queue and the batcher."""

    @property
    def batch_max_samples(self) -> int: ...

    @property
    def batch_max_age(self) -> float: ...

    @property
    def queue_max_batches(self) -> int: ...


class HttpSettings(Protocol):
    """What :class:`~falcon_gpu.delivery.http.HttpTransport` reads: deadline, TLS, auth, headers."""

    @property
    def timeout(self) -> float: ...

    @property
    def bearer_token_file(self) -> Path | None: ...

    @property
    def basic_auth_user(self) -> str | None: ...

    @property
    def basic_auth_password_file(self) -> Path | None: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def ca_file(self) -> Path | None: ...

    @property
    def cert_file(self) -> Path | None: ...

    @property
    def key_file(self) -> Path | None: ...

    @property
    def insecure_skip_verify(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class PlainHttp:
    """:class:`HttpSettings` for a client that has only a timeout: no TLS options, auth or
    extra headers (policy notifications, which have no settings of their own for them)."""

    timeout: float
    bearer_token_file: Path | None = None
    basic_auth_user: str | None = None
    basic_auth_password_file: Path | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    insecure_skip_verify: bool = False
