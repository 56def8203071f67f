"""``falcon-gpu install-plugin DIR [--config FILE]``: the falcon-agent plugin, bound to this installation.

Why not copy ``plugins/60_gpu_monitor.py``: falcon-agent runs plugins with a
bare environment (no ``PATH`` beyond the default, no virtualenv), and Debian
refuses a system-wide ``pip install``, so ``#!/usr/bin/env python3`` finds an
interpreter without falcon_gpu and the plugin prints ``[]`` forever. The file
written here starts with the absolute path of the interpreter running this
command, so it imports the same falcon_gpu wherever and however it is run, and
passes ``--config`` (made absolute: falcon-agent's working directory is its own).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from falcon_gpu import __version__

PLUGIN_NAME = "60_gpu_monitor.py"
"""falcon-agent runs ``<seconds>_<name>`` files every ``<seconds>``: this one every minute."""
MAX_SHEBANG = 127
"""The shortest kernel limit on a ``#!`` line still in service (Linux before 5.1)."""

_TEMPLATE = '''#!{python}
"""Open-Falcon falcon-agent plugin: one cycle of GPU and pod metrics as one JSON array.

Written by `falcon-gpu install-plugin` (falcon-gpu {version}) for the interpreter above;
run that command again after moving or recreating that installation.
Prints exactly one JSON array on stdout, logs warnings and errors to stderr,
and exits 0 even when GPUs fail (falcon-agent ignores a plugin that exits non-zero).
"""

import gc
import sys

CONFIG = {config!r}

# A process that lives one cycle: the cyclic collector would only walk the objects the imports
# build, again and again, to free nothing that exiting does not (about 5% of the run's instructions).
gc.disable()
try:
    from falcon_gpu.cli import main
except ImportError as exc:  # the installation is gone: still one valid JSON array
    sys.stderr.write(f"60_gpu_monitor: falcon_gpu cannot be imported ({{exc}}); run install-plugin again\\n")
    sys.stdout.write("[]\\n")
    sys.exit(0)
sys.exit(main(["plugin", *(["--config", CONFIG] if CONFIG else []), *sys.argv[1:]]))
'''


def render(python: str, config: Path | None) -> str:
    return _TEMPLATE.format(python=python, version=__version__, config=str(config) if config else None)


def install_plugin(directory: Path, config: Path | None) -> int:
    """Write ``directory/60_gpu_monitor.py`` (mode 0755, atomically); exit code as the CLI's."""
    python = os.path.abspath(sys.executable)  # not resolved: a venv's bin/python is what finds its packages
    if len(python) + 2 > MAX_SHEBANG or any(c.isspace() for c in python):
        print(
            f"falcon-gpu: install-plugin: the interpreter path {python!r} cannot be a #! line "
            "(spaces, or longer than 125 characters); install falcon-gpu under a shorter path",
            file=sys.stderr,
        )
        return 1
    if config is not None:
        from falcon_gpu.settings import ConfigError, load_settings

        config = Path(os.path.abspath(config))  # absolute and normalised (no "..")
        try:
            load_settings(config)  # the plugin would print [] forever with a broken file: say so now
        except ConfigError as exc:
            print(f"falcon-gpu: {exc}", file=sys.stderr)
            return 2
    target = directory / PLUGIN_NAME
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{PLUGIN_NAME}.tmp"
        tmp.write_text(render(python, config), encoding="utf-8")
        tmp.chmod(0o755)
        tmp.replace(target)
    except OSError as exc:
        print(f"falcon-gpu: install-plugin: cannot write {target}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {target} (interpreter {python}{f', --config {config}' if config else ''})")
    return 0
