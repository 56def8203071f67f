"""The web configuration in force, read again when its file (or a certificate it names) changes.

exporter-toolkit reads the file on every request; here a stat of the file and its certificate
files, at most once a second, decides whether to read it again, so a renewed certificate (e.g. a
Secret that cert-manager rotates) or a changed user list takes effect within a second for new
connections and requests, without a restart. A file that breaks while the agent runs keeps the
last good configuration (counted as ``errors_total{kind="web_config"}``, logged once, and once
more when it is good again): a typo must not turn TLS off or lock the scrapers out.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path

from falcon_gpu.listen.web_config import WebConfig, WebConfigError, load_web_config, tls_context
from falcon_gpu.model.telemetry import Telemetry

log = logging.getLogger(__name__)

CHECK_EVERY_S = 1.0
Signature = tuple[tuple[int, int, int] | None, ...]


def _signature(paths: tuple[Path, ...]) -> Signature:
    out: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(out)


class LiveWebConfig:
    """Raises WebConfigError at construction when the file cannot be used (the agent exits 2)."""

    def __init__(
        self, path: Path, telemetry: Telemetry, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.path = path
        self._telemetry = telemetry
        self._clock = clock
        self._lock = threading.Lock()
        self._config, self._context = self._read()
        self._signature = self._current_signature()
        self._checked = clock()
        self._generation = 0

    @property
    def generation(self) -> int:
        """Counts the configurations put in force; checks the file first, as :meth:`current`."""
        with self._lock:
            self._check_locked()
            return self._generation

    def _read(self) -> tuple[WebConfig, ssl.SSLContext | None]:
        config = load_web_config(self.path)
        return config, tls_context(config.tls) if config.tls is not None else None

    def _current_signature(self) -> Signature:
        return _signature((self.path, *self._config.files))

    def current(self) -> tuple[WebConfig, ssl.SSLContext | None]:
        """The configuration in force (and its TLS context, None for plain HTTP)."""
        with self._lock:
            self._check_locked()
            return self._config, self._context

    def _check_locked(self) -> None:
        now = self._clock()
        if now - self._checked >= CHECK_EVERY_S:
            self._checked = now
            if self._current_signature() != self._signature:
                self._reload_locked()

    def reload(self) -> bool:
        """Read the file now (e.g. on SIGHUP); False when it is bad and the last good one stays."""
        with self._lock:
            return self._reload_locked()

    def _reload_locked(self) -> bool:
        try:
            config, context = self._read()
        except WebConfigError as exc:
            self._signature = self._current_signature()  # logged once per change, not every second
            self._telemetry.failing(
                "web_config", "web_config",
                f"setting 'web_config_file': {self.path}: {exc}; keeping the configuration in force",
            )  # fmt: skip
            return False
        self._config, self._context = config, context
        self._generation += 1
        self._signature = self._current_signature()
        self._telemetry.recovered("web_config", "setting 'web_config_file': good again")
        log.info("listen: web configuration %s in force (%s)", self.path, describe(config))
        return True


def describe(config: WebConfig) -> str:
    tls = "plain HTTP" if config.tls is None else f"TLS, client certificates: {config.tls.client_auth_type}"
    users = f"basic auth for {len(config.users)} users" if config.users else "no basic auth"
    return f"{tls}, {users}"
