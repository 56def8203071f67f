"""The command line built for one command parses and helps exactly as the full parser does.

``cli._parser(argv)`` builds only the subparser of the command ``argv`` starts with (the plugin's
start-up, forked every minute, pays for no other); these check that nothing a user sees changes.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from falcon_gpu.cli import COMMANDS, _parser

SAMPLES = {
    "run": ["run", "--once", "--interval", "2.5", "--log-level", "DEBUG", "--simulate"],
    "plugin": ["plugin", "--simulate", "h100", "--config", "/etc/x.toml"],
    "doctor": ["doctor", "--log-level", "error"],
    "install-plugin": ["install-plugin", "/opt/plugins", "--config", "/etc/x.toml"],
    "stats": ["stats", "--namespace", "ml", "--pod", "p-0", "--since", "2h"],
    "top": ["top", "--once", "--interval", "1"],
    "advise": ["advise", "--since", "30m", "--headroom", "0.2", "--format", "json"],
}


def _printed(parser_argv: list[str], argv: list[str]) -> tuple[str, str, object]:
    """What parsing ``argv`` prints on stdout and stderr, and its exit code (None: it returned)."""
    out, err = io.StringIO(), io.StringIO()
    code: object = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            _parser(parser_argv).parse_args(argv)
        except SystemExit as exc:
            code = exc.code
    return out.getvalue(), err.getvalue(), code


def test_every_command_has_a_sample() -> None:
    assert set(SAMPLES) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_one_command_parses_as_the_full_parser(command: str) -> None:
    argv = SAMPLES[command]
    assert vars(_parser(argv).parse_args(argv)) == vars(_parser().parse_args(argv))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_one_command_helps_and_refuses_as_the_full_parser(command: str) -> None:
    for argv in ([command, "--help"], [command, "--no-such-flag"], [command, "--config"]):
        assert _printed(argv, argv) == _printed([], argv), argv


def test_the_top_level_help_lists_every_command() -> None:
    printed, _, code = _printed(["--help"], ["--help"])
    assert code == 0 and all(f"    {name}" in printed for name in COMMANDS)
