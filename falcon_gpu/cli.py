"""Command line: ``falcon-gpu run | plugin | doctor | install-plugin | stats | top | advise``
(CONTRACT section 1).

Thin on purpose: parse flags, load settings, hand over to the agent. Exit codes:
0 success, 2 invalid configuration, arguments or scenario (the message names
the setting), 1 any other fatal error; never a traceback for a user's mistake.
Each command's code is imported when it runs, so that ``plugin`` (forked by falcon-agent every
minute) loads only what one cycle needs.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from falcon_gpu import __version__

EXIT_OK, EXIT_FATAL, EXIT_USAGE = 0, 1, 2
LOG_LEVELS = ("debug", "info", "warning", "error")


def _common(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="TOML settings file (default /etc/falcon-gpu/falcon-gpu.toml when it exists)",
    )
    sp.add_argument(
        "--simulate",
        nargs="?",
        const="default",
        metavar="SCENARIO",
        help="use the NVML simulator: a scenario file, a bundled name, or nothing for the bundled 4-GPU node",
    )
    sp.add_argument("--log-level", type=str.lower, choices=LOG_LEVELS, default=None)


def _run_args(run: argparse.ArgumentParser) -> None:
    run.epilog = _bundled_scenarios()
    _common(run)
    run.add_argument("--once", action="store_true", help="one cycle, flush every sink, exit")
    run.add_argument("--interval", type=float, metavar="S", help="seconds between cycles")
    run.add_argument("--web.config.file", dest="web_config_file", type=Path, metavar="FILE",
                     help="TLS and basic auth for `listen` (exporter-toolkit's format)")  # fmt: skip


def _top_args(top: argparse.ArgumentParser) -> None:
    _common(top)
    top.add_argument("--once", action="store_true", help="print one frame and exit")
    top.add_argument("--interval", type=float, metavar="S", help="seconds between frames")


def _install_args(install: argparse.ArgumentParser) -> None:
    install.add_argument("dir", type=Path, metavar="DIR", help="falcon-agent's plugin directory")
    install.add_argument("--config", type=Path, metavar="FILE", help="settings file the plugin passes on")


def _stats_args(stats: argparse.ArgumentParser) -> None:
    stats.add_argument("--config", type=Path, metavar="FILE", help="settings file (for jobs_dir)")
    stats.add_argument("--namespace", metavar="NS", help="only this namespace")
    stats.add_argument("--pod", metavar="P", help="only this pod")
    stats.add_argument("--since", type=_duration, metavar="DURATION", help="only jobs that ended within "
                       "this long, e.g. 30m, 2h, 1d or seconds")  # fmt: skip


def _advise_args(advise: argparse.ArgumentParser) -> None:
    _common(advise)
    advise.add_argument("--namespace", metavar="NS", help="only this namespace")
    advise.add_argument("--since", type=_duration, metavar="DURATION", help="only jobs that ended within "
                        "this long (running ones always count), e.g. 30m, 2h, 1d or seconds")  # fmt: skip
    advise.add_argument("--headroom", type=_headroom, metavar="RATIO",
                        help="room above p95 memory and SM, e.g. 0.2 (default: advice_headroom)")  # fmt: skip
    advise.add_argument("--format", choices=("table", "json"), default="table", help="output format")


COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "run": ("the agent: collect, attribute and push every interval", _run_args),
    "plugin": ("one cycle as an Open-Falcon JSON array on stdout", _common),
    "doctor": ("check NVML, process visibility, kubelet socket, log dirs, sinks", _common),
    "top": ("this node's GPUs with their pods and processes, live", _top_args),
    "install-plugin": ("write 60_gpu_monitor.py for falcon-agent into DIR, bound to this installation",
                       _install_args),
    "stats": ("recent per-pod job records (from jobs_dir) as a table, newest first", _stats_args),
    "advise": ("per workload: memory, SM, and the smallest MIG profile, share or GPU that holds it",
               _advise_args),
}  # fmt: skip
"""Each subcommand: its help line and what adds its arguments (in ``--help``'s order)."""


def _parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The command line's parser. When ``argv`` starts with a command, only that command's
    subparser is built: every ``add_parser``/``add_argument`` costs argparse a help formatter and
    gettext look-ups (a third of the cached plugin's CLI cost for six commands it never runs); the
    chosen command parses and reports errors exactly as with all of them. Anything else
    (``--help``, ``--version``, a typo, no ``argv``) gets the full parser, so the top-level help and
    the invalid-choice error list every command."""
    p = argparse.ArgumentParser(prog="falcon-gpu", description="NVIDIA GPU and per-pod GPU metrics agent.")
    p.add_argument("--version", action=_Version, nargs=0, help="show the installed version and exit")
    sub = p.add_subparsers(
        dest="command", required=True, metavar="{run,plugin,doctor,install-plugin,stats,top,advise}"
    )
    chosen = argv[0] if argv and argv[0] in COMMANDS else None
    for name, (help_line, add_arguments) in COMMANDS.items():
        if chosen in (None, name):
            add_arguments(sub.add_parser(name, help=help_line))
    return p


class _Version(argparse.Action):
    """``--version`` from the installed package's metadata (what pip installed, the version a bug
    report needs), read only when asked for: importlib.metadata is not on every command's path."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("falcon-gpu")
        except PackageNotFoundError:  # run from a source tree that was never installed
            installed = f"{__version__} (not installed)"
        print(f"falcon-gpu {installed}")
        parser.exit()


def _bundled_scenarios() -> str:
    """``run --help``'s list of the scenarios ``--simulate NAME`` takes (the package's files: one
    directory listing, not the simulator's import)."""
    folder = Path(__file__).parent / "simulator" / "scenarios"
    names = sorted(p.stem for p in folder.glob("*.json"))
    return "bundled scenarios for --simulate: default (mixed-4gpu), " + ", ".join(names)


def _headroom(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 4.0:
        raise argparse.ArgumentTypeError(f"expected a ratio from 0 to 4 (0.2 = 20 %), got {text!r}")
    return value


def _duration(text: str) -> float:
    from falcon_gpu.jobs.stats import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _effective_level(command: str, level: str) -> str:
    """``plugin`` runs every minute under falcon-agent, ``top`` and ``advise`` print for a person:
    warnings and errors only, unless debugging. ``doctor`` prints its table, which says what is wrong
    and how to fix it: no log beside it but errors (``--log-level`` / ``log_level`` other than info
    still apply)."""
    if command in ("plugin", "top", "advise") and level == "info":
        return "warning"
    if command == "doctor" and level == "info":
        return "error"
    return level


def _quiet_grpc(level: str) -> None:
    """gRPC's C core logs to stderr on its own (``I1201 … chttp2_transport.cc] Got goaway``);
    the agent reports the kubelet's state itself, so the core stays silent unless debugging.
    Must run before grpc is first imported (the core reads these at load)."""
    if level == "debug":
        return
    os.environ["GRPC_VERBOSITY"] = "NONE"
    os.environ.pop("GRPC_TRACE", None)


def _apply_level(command: str, configured: str) -> None:
    level = _effective_level(command, configured)
    logging.getLogger().setLevel(level.upper())
    _quiet_grpc(level)


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    args = _parser(argv).parse_args(argv)
    if args.command == "install-plugin":
        from falcon_gpu.plugin_install import install_plugin

        return install_plugin(args.dir, args.config)
    _setup_logging(_effective_level(args.command, getattr(args, "log_level", None) or "info"))
    from falcon_gpu.settings_sources import ConfigError

    try:
        from falcon_gpu.simulator.scenario.strict_json import ScenarioError
    except ImportError:  # pragma: no cover - the simulator ships with the package
        ScenarioError = ValueError  # type: ignore[misc,assignment]
    overrides: dict[str, Any] = {
        "interval": getattr(args, "interval", None),
        "log_level": getattr(args, "log_level", None),
        "web_config_file": getattr(args, "web_config_file", None),
    }
    try:
        if args.command == "plugin":  # through the validated-settings cache: no pydantic while unchanged
            from falcon_gpu.settings_cache import plugin_settings

            resolved = plugin_settings(args.config, overrides)
            _apply_level(args.command, resolved.log_level)
            from falcon_gpu.agent.commands import plugin

            return plugin(resolved, simulate=args.simulate)
        from falcon_gpu.settings import load_settings

        settings = load_settings(args.config, **overrides)
        _apply_level(args.command, settings.log_level)
        if args.command == "run":
            from falcon_gpu.agent.commands import run

            config = args.config
            return run(
                settings,
                simulate=args.simulate,
                once=args.once,
                reload_settings=lambda: load_settings(config, **overrides),
            )
        if args.command == "stats":
            from falcon_gpu.jobs.stats import stats

            return stats(settings.jobs_dir, namespace=args.namespace, pod=args.pod, since=args.since)
        if args.command == "advise":
            from falcon_gpu.agent.advise import advise_command

            return advise_command(
                settings,
                simulate=args.simulate,
                namespace=args.namespace,
                since=args.since,
                headroom=args.headroom,
                as_json=args.format == "json",
            )
        if args.command == "top":
            from falcon_gpu.top.command import top

            return top(settings, simulate=args.simulate, once=args.once)
        from falcon_gpu.doctor import doctor

        return doctor(settings, simulate=args.simulate)
    except (ConfigError, ScenarioError) as exc:
        what = "invalid scenario: " if isinstance(exc, ScenarioError) else ""
        print(f"falcon-gpu: {what}{exc}", file=sys.stderr)
        if args.command == "plugin":  # falcon-agent drops a failing plugin's output: still one array
            from falcon_gpu.agent.commands import print_items

            print_items([])
            return EXIT_OK
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:
        logging.getLogger("falcon_gpu").debug("fatal", exc_info=True)
        print(f"falcon-gpu: fatal: {exc}", file=sys.stderr)
        return EXIT_FATAL


if __name__ == "__main__":
    sys.exit(main())
