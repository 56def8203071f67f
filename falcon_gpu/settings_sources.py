"""Where settings come from besides flags: the TOML file and ``FALCON_GPU_*`` variables.

Hand-written rather than pydantic-settings' own environment source because the
contract asks for more than it does: every key as ``FALCON_GPU_<KEY>`` (its
source skips the prefix for an aliased field such as ``schema``), and an
unknown ``FALCON_GPU_*`` variable is an error naming the nearest key (it
ignores unknown variables, so a typo silently does nothing). Every problem is a
:class:`ConfigError` whose message names the file, flag or variable.
"""

from __future__ import annotations

import json
import os
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ENV_PREFIX = "FALCON_GPU_"
NESTED = "__"
DEFAULT_CONFIG_FILE = Path("/etc/falcon-gpu/falcon-gpu.toml")


class ConfigError(Exception):
    """A setting is invalid; the message names it and says why."""


def config_file_in_use(config_file: Path | None) -> Path | None:
    """``--config``, else the default file when it exists, else none (defaults and environment only)."""
    if config_file is None and DEFAULT_CONFIG_FILE.exists():
        return DEFAULT_CONFIG_FILE
    return config_file


def read_toml(path: Path) -> dict[str, Any]:
    """The parsed file given by ``--config``; any reason it cannot be used names ``--config``."""
    import tomllib  # here: the plugin's cached path reads no TOML

    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"--config: file {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"--config: {path} is a directory; give the TOML file inside it") from None
    except PermissionError:
        raise ConfigError(f"--config: cannot read {path}: permission denied") from None
    except OSError as exc:
        raise ConfigError(f"--config: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"--config: {path} is not UTF-8 text (byte {exc.start}); TOML files must be UTF-8"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--config: {path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(
            f"--config: {path} nests arrays or tables too deeply to be a configuration"
        ) from None
    except ValueError as exc:  # an integer of more digits than Python converts (4300)
        raise ConfigError(f"--config: {path} holds a value that cannot be read: {exc}") from None


def _is_structured(annotation: Any) -> bool:
    """Lists, tables and models must be given as JSON in the environment."""
    from pydantic import BaseModel  # here, not at the top: the plugin's cached path never loads pydantic

    origin = typing.get_origin(annotation)
    if origin in (list, dict, tuple, set):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_structured(a) for a in typing.get_args(annotation) if a is not type(None))
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The key a misspelt name most likely meant (only on the error path: imported here)."""
    import difflib

    found = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return found[0] if found else None


def read_env(fields: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``FALCON_GPU_<KEY>`` variables as a settings dict (``fields``: external key → annotation).

    ``FALCON_GPU_A__B=v`` sets ``a.b`` (a table entry); a list or table value is JSON.
    Raises ConfigError for an unknown variable (suggesting the nearest key) and for
    a structured value that is not JSON.
    """
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for var, raw in sorted(environ.items()):
        if not var.upper().startswith(ENV_PREFIX):
            continue
        path = var[len(ENV_PREFIX) :].lower().split(NESTED)
        key = path[0]
        if key not in fields:
            hint = nearest(key, fields)
            suggestion = f"; did you mean {ENV_PREFIX}{hint.upper()}?" if hint else ""
            raise ConfigError(f"environment variable {var}: unknown setting {key!r}{suggestion}")
        structured = _is_structured(fields[key]) and len(path) == 1
        value: Any = raw
        if structured or raw.lstrip()[:1] in ("[", "{"):
            try:
                value = json.loads(raw)
            except (ValueError, RecursionError):  # RecursionError: nested too deeply to be a setting
                if structured:
                    raise ConfigError(
                        f"invalid configuration (environment):\n  setting {key!r}: {var} must be JSON "
                        '(a list or table), e.g. \'[{"type": "stdout"}]\''
                    ) from None
        node = out
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"environment variable {var}: {part!r} is also given as a whole value")
            node = child
        node[path[-1]] = value
    return out
