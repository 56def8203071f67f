"""The plugin's validated-settings cache: pydantic runs when the inputs change, not every minute.

falcon-agent forks the plugin every minute, and validating with pydantic-settings
is most of its start-up (see docs/BENCHMARKS.md "Plugin start-up"). So the plugin
validates with the real :class:`~falcon_gpu.settings.Settings` model, keeps its values but
the outputs' (:class:`~falcon_gpu.settings_resolved.ResolvedSettings`) in a small file
with their digest, and later runs load that file without importing pydantic, as long as every
input is unchanged:

* the key: the cache format, the package version, the config file's path and bytes,
  every ``FALCON_GPU_*`` variable, ``NODE_NAME`` and the host name (the default
  ``node``), and the command-line flags, hashed (an environment value may be a
  secret: only its hash is written);
* every file or directory the settings name (a sink's ``ca_file``, the token
  *path*, never its content), by type, size, mtime and inode: validation reads
  TLS files, so one that changed or vanished is validated again.

Any mismatch, unreadable or malformed cache (values that are not the digest's) falls
back to full validation, so a bad setting gives the same message on every run, never
only on the first (an invalid configuration is never cached). The file lives in
``$XDG_CACHE_HOME/falcon-gpu`` (else ``~/.cache/falcon-gpu``), mode 0600, one per
config path; when it cannot be written the plugin just validates every time.

The plugin runs as root under falcon-agent, in a directory another user may own (an
``XDG_CACHE_HOME`` or a ``HOME`` that sudo kept): the cache directory must be a real
directory of the running user that no one else can write (else the plugin runs without the
cache, with a warning), every open and rename goes through its descriptor without following
a symlink, and the temporary file has a random name created with ``O_EXCL``, so nothing a
local user plants is ever written through.
"""

from __future__ import annotations

import contextlib
import errno
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

CACHE_FORMAT = 3
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


def _sum(settings: Any) -> str:
    """The stored values' digest: a file that parses but holds other values is not used."""
    return _digest([json.dumps(settings, sort_keys=True)])


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


def _cache_name(config: Path | None) -> str:
    return f"plugin-settings-{_digest([str(config)])[:16]}.json"


def _untrusted(st: os.stat_result, kind: str) -> str | None:
    """Why a cache directory or file must not be used (as ssh refuses a ``~/.ssh`` others could
    write): another user's, or writable by group or others. None when it is this user's alone."""
    if not (stat.S_ISDIR if kind == "directory" else stat.S_ISREG)(st.st_mode):
        return f"is not a {kind}"
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def open_cache_dir(directory: Path) -> int | None:
    """A descriptor of ``directory`` (made 0700 when missing) that every later open and rename goes
    through, so a path swapped after the check (a parent another user owns: an ``XDG_CACHE_HOME``
    or a ``HOME`` that sudo kept) is never followed; None when the cache cannot be used: silently
    when it cannot be made (the plugin validates every time), with a warning when it is not this
    user's alone (a symlink, another user's, writable by others)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
        fd = os.open(directory, flags)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and directory.is_symlink():  # O_DIRECTORY says ENOTDIR
            _refuse(directory, "is a symbolic link")
        else:
            log.debug("settings cache %s not usable: %r", directory, exc)
        return None
    problem = _untrusted(os.fstat(fd), "directory")
    if problem is not None:
        os.close(fd)
        _refuse(directory, problem)
        return None
    return fd


def _refuse(path: Path, problem: str) -> None:
    log.warning(
        "settings cache %s %s: validating the settings in full on every run instead; "
        "remove it or make it this user's alone (chown, chmod 700)", path, problem
    )  # fmt: skip


MAX_BYTES = 1 << 20
"""A cache file is a few KiB; a larger one is not ours."""


def read_cached(directory: int, name: str, key: str) -> ResolvedSettings | None:
    """The cached settings when ``key`` and every named file still match and the file is this user's,
    writable by no one else; None otherwise: anything unreadable, malformed or foreign (a JSON
    nested 100,000 deep included) falls back to full validation, never fails the plugin."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.debug("settings cache %s unusable: %r", name, exc)
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            problem = _untrusted(os.fstat(fh.fileno()), "file")
            if problem is not None:  # replaced by the fresh one this run writes
                log.warning("settings cache file %s %s: not used, written again", name, problem)
                return None
            raw = fh.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            return None
        data = json.loads(raw)
        if data["key"] != key:
            return None
        for path, seen in data["files"]:
            if fingerprint(path) != seen:
                return None
        if data["sum"] != _sum(data["settings"]):  # edited by anything but write_cached
            return None
        return ResolvedSettings.from_json(data["settings"])
    except Exception as exc:  # corrupt, too deep, foreign: the cache must never cost more than itself
        log.debug("settings cache %s unusable: %r", name, exc)
        return None


def write_cached(directory: int, name: str, key: str, files: list[str], resolved: ResolvedSettings) -> None:
    """Atomically (a new file, then a rename, both inside ``directory``), readable by this user
    only; the temporary name is random and created with ``O_EXCL | O_NOFOLLOW``, so nothing
    planted under it is ever written through. A failure costs only the cache (logged at debug)."""
    settings = resolved.to_json()
    body = {
        "key": key,
        "files": [[path, fingerprint(path)] for path in files],
        "settings": settings,
        "sum": _sum(settings),
    }
    tmp = f".{name}.{os.urandom(8).hex()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o600, dir_fd=directory)
    except OSError as exc:
        log.debug("settings cache %s not written: %r", name, exc)
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(body, fh)
        os.replace(tmp, name, src_dir_fd=directory, dst_dir_fd=directory)
    except OSError as exc:
        log.debug("settings cache %s not written: %r", name, exc)
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=directory)


def plugin_settings(config_file: Path | None, overrides: Mapping[str, Any]) -> ResolvedSettings:
    """The plugin's settings: from the cache when its inputs are unchanged, else validated in full
    (raising ConfigError naming the setting, as :func:`~falcon_gpu.settings.load_settings` does)."""
    config = config_file_in_use(config_file)
    environ = dict(os.environ)
    path = cache_dir(environ)
    try:
        raw = config.read_bytes() if config is not None else b""
    except OSError:  # full validation says why, naming --config
        path = None
    directory = open_cache_dir(path) if path is not None else None
    try:
        return _through(directory, config, raw, config_file, overrides, environ)
    finally:
        if directory is not None:
            os.close(directory)


def _through(
    directory: int | None,
    config: Path | None,
    raw: bytes,
    config_file: Path | None,
    overrides: Mapping[str, Any],
    environ: Mapping[str, str],
) -> ResolvedSettings:
    name = _cache_name(config)
    key = cache_key(config, raw, overrides, environ) if directory is not None else ""
    if directory is not None:
        cached = read_cached(directory, name, key)
        if cached is not None:
            return cached
    from falcon_gpu.settings import load_settings

    settings = load_settings(config_file, **overrides)
    resolved = ResolvedSettings.of(settings)
    if directory is not None and _unchanged(config, raw):
        write_cached(directory, name, key, named_files(settings), resolved)
    return resolved


def _unchanged(config: Path | None, raw: bytes) -> bool:
    """The file validated is the one keyed (an edit in between must not be cached under the old key)."""
    try:
        return config is None or config.read_bytes() == raw
    except OSError:
        return False
