"""The plugin's validated-settings cache: pydantic runs when the inputs change, not every minute.

falcon-agent forks the plugin every minute, and validating with pydantic-settings
is most of its start-up (see docs/BENCHMARKS.md "Plugin start-up"). So the plugin
validates with the real :class:`~falcon_gpu.settings.Settings` model, keeps the values
its cycle reads (:class:`~falcon_gpu.settings_resolved.ResolvedSettings`) in a small
file, and later runs load that file without importing pydantic, as long as every
input is unchanged:

* the key: the cache format, the package version, the config file's path and bytes,
  every ``FALCON_GPU_*`` variable, ``NODE_NAME`` and the host name (the default
  ``node``), and the command-line flags, hashed (an environment value may be a
  secret: only its hash is written);
* every file or directory the settings name (a sink's ``ca_file``, the token
  *path*, never its content), by type, size, mtime and inode: validation reads
  TLS files, so one that changed or vanished is validated again.

Any mismatch, unreadable or malformed cache falls back to full validation, so a
bad setting gives the same message on every run, never only on the first (an
invalid configuration is never cached). The file lives in
``$XDG_CACHE_HOME/falcon-gpu`` (else ``~/.cache/falcon-gpu``), mode 0600, one per
config path; when it cannot be written the plugin just validates every time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from falcon_gpu import __version__
from falcon_gpu.settings_resolved import ResolvedSettings
from falcon_gpu.settings_sources import ENV_PREFIX, config_file_in_use

if TYPE_CHECKING:
    from falcon_gpu.settings import Settings

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
"""Bump when the file's layout or the meaning of a stored value changes."""
Fingerprint = list[int] | str | None


def cache_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """``$XDG_CACHE_HOME/falcon-gpu``, else ``~/.cache/falcon-gpu``; None without a home."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(base):
        return Path(base) / "falcon-gpu"
    try:  # falcon-agent runs plugins with an empty environment: no HOME, the passwd entry answers
        return Path.home() / ".cache" / "falcon-gpu"
    except (RuntimeError, KeyError):
        return None


def _digest(parts: list[str]) -> str:
    try:  # hashlib itself loads OpenSSL first: a few ms of every plugin start for a hash it has built in
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - an interpreter without the builtin module
        from hashlib import blake2b

    return blake2b("\0".join(parts).encode("utf-8", "surrogateescape"), digest_size=20).hexdigest()


def cache_key(
    config: Path | None, raw: bytes, overrides: Mapping[str, Any], environ: Mapping[str, str]
) -> str:
    """Everything validation reads besides the files the settings name (see the module doc)."""
    parts = [f"format {CACHE_FORMAT}", f"falcon-gpu {__version__}", f"config {config}", raw.hex()]
    parts += [f"{k}={v}" for k, v in sorted(environ.items()) if k.upper().startswith(ENV_PREFIX)]
    parts += [f"NODE_NAME={environ.get('NODE_NAME')}", f"host {os.uname().nodename}"]
    parts += [f"--{k}={v!r}" for k, v in sorted(overrides.items()) if v is not None]
    return _digest(parts)


def fingerprint(path: str) -> Fingerprint:
    """What validation could see of ``path``: a file by size, mtime and inode, else its kind."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode):
        return [st.st_size, st.st_mtime_ns, st.st_ino]
    return "dir" if stat.S_ISDIR(st.st_mode) else "other"


def _paths(value: Any) -> Iterator[str]:
    if isinstance(value, Path):
        yield str(value)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _paths(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _paths(v)


def named_files(settings: Settings) -> list[str]:
    """Every path anywhere in the settings, sinks' and policies' included, once each."""
    return sorted(set(_paths(settings.model_dump())))


def _cache_file(directory: Path, config: Path | None) -> Path:
    return directory / f"plugin-settings-{_digest([str(config)])[:16]}.json"


def read_cached(path: Path, key: str) -> ResolvedSettings | None:
    """The cached settings when ``key`` and every named file still match and the file is this user's,
    writable by no one else (a shared ``XDG_CACHE_HOME``); None otherwise."""
    try:
        with path.open("rb") as fh:
            st = os.fstat(fh.fileno())
            if st.st_uid != os.geteuid() or st.st_mode & 0o022:  # another user could have written it
                return None
            data = json.load(fh)
        if data["key"] != key:
            return None
        for name, seen in data["files"]:
            if fingerprint(name) != seen:
                return None
        return ResolvedSettings.from_json(data["settings"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:  # corrupt or foreign: validate afresh
        log.debug("settings cache %s unusable: %r", path, exc)
        return None


def write_cached(path: Path, key: str, files: list[str], resolved: ResolvedSettings) -> None:
    """Atomically, readable by this user only; a failure costs only the cache (logged at debug)."""
    body = {
        "key": key,
        "files": [[name, fingerprint(name)] for name in files],
        "settings": resolved.to_json(),
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(body, fh)
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("settings cache %s not written: %r", path, exc)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def plugin_settings(config_file: Path | None, overrides: Mapping[str, Any]) -> ResolvedSettings:
    """The plugin's settings: from the cache when its inputs are unchanged, else validated in full
    (raising ConfigError naming the setting, as :func:`~falcon_gpu.settings.load_settings` does)."""
    config = config_file_in_use(config_file)
    environ = dict(os.environ)
    directory = cache_dir(environ)
    try:
        raw = config.read_bytes() if config is not None else b""
    except OSError:  # full validation says why, naming --config
        directory = None
    key = cache_key(config, raw, overrides, environ) if directory is not None else ""
    if directory is not None:
        cached = read_cached(_cache_file(directory, config), key)
        if cached is not None:
            return cached
    from falcon_gpu.settings import load_settings

    settings = load_settings(config_file, **overrides)
    resolved = ResolvedSettings.of(settings)
    if directory is not None and _unchanged(config, raw):
        write_cached(_cache_file(directory, config), key, named_files(settings), resolved)
    return resolved


def _unchanged(config: Path | None, raw: bytes) -> bool:
    """The file validated is the one keyed (an edit in between must not be cached under the old key)."""
    try:
        return config is None or config.read_bytes() == raw
    except OSError:
        return False
