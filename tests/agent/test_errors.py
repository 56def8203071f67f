"""Exit codes and error messages (issue 8 items 8-11): a user's mistake exits 2 naming the
flag, file or variable, with no traceback; ``run --once`` says which sink dropped data."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from falcon_gpu import __version__
from falcon_gpu.cli import _parser, main
from falcon_gpu.settings import ConfigError, load_settings
from tests.delivery.conftest import HttpPeer

ROOT = Path(__file__).resolve().parents[2]
SINK_TYPES = "stdout, falcon_agent, falcon_transfer, pushgateway, remote_write"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No FALCON_GPU_* from the caller's shell, and main()'s gRPC switches undone afterwards."""
    import os

    for var in list(os.environ):
        if var.startswith("FALCON_GPU_"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("GRPC_VERBOSITY", "")


@pytest.fixture
def peer() -> Iterator[HttpPeer]:
    p = HttpPeer()
    yield p
    p.close()


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "falcon_gpu", *args],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
        env=env,
    )


# -- item 8: files that are not what they should be ----------------------------------------
def test_config_that_is_a_directory_or_not_utf8_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes('node = "n\xf6de"\n'.encode("latin-1"))
    for bad in (tmp_path, latin1):
        assert main(["run", "--once", "--config", str(bad)]) == 2
        err = capsys.readouterr().err
        assert "--config" in err and str(bad) in err, err
        assert "fatal" not in err and "Errno" not in err and "codec" not in err
    assert "is a directory" in (main(["run", "--config", str(tmp_path)]), capsys.readouterr().err)[1]


@pytest.mark.parametrize("kind", ["latin1", "deep"])
def test_scenario_not_utf8_or_too_deep_exits_2_and_plugin_prints_empty_array(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    scenario = tmp_path / f"{kind}.json"
    if kind == "latin1":
        scenario.write_bytes('{"driver_version": "5\xb5"}'.encode("latin-1"))
    else:
        scenario.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["run", "--once", "--simulate", str(scenario)]) == 2
    captured = capsys.readouterr()
    assert str(scenario) in captured.err and "recursion" not in captured.err, captured.err
    assert main(["plugin", "--simulate", str(scenario)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "[]\n"
    assert str(scenario) in captured.err


def test_plugin_with_a_bad_setting_still_prints_one_array(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("interval = -1\n")
    assert main(["plugin", "--config", str(cfg)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "[]\n" and "'interval'" in captured.err


# -- item 9: every key from the environment, unknown variables, clearer messages --------------
def test_every_key_works_from_the_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'spool_dir = "{tmp_path / "spool"}"\n')
    env = {"PATH": "/usr/bin:/bin", "FALCON_GPU_SCHEMA": "dcgm", "FALCON_GPU_LOG_LEVEL": "WARNING"}
    proc = run_cli("run", "--once", "--simulate", "--config", str(cfg), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "DCGM_FI_DEV_GPU_UTIL{" in proc.stdout and "falcon_gpu_utilization_ratio" not in proc.stdout
    assert " INFO " not in proc.stderr  # FALCON_GPU_LOG_LEVEL=WARNING took effect too


def test_env_values_reach_every_kind_of_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FALCON_GPU_SCHEMA", "DCGM")
    monkeypatch.setenv("FALCON_GPU_KUBERNETES", "off")
    monkeypatch.setenv("FALCON_GPU_PROCESS_METRICS", "true")
    monkeypatch.setenv("FALCON_GPU_GPU_RESOURCES", '["example.com/gpu"]')
    s = load_settings()
    assert (s.schema_, s.kubernetes, s.process_metrics, s.gpu_resources) == (
        "dcgm",
        "off",
        True,
        ["example.com/gpu"],
    )


def test_invalid_env_value_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FALCON_GPU_SCHEMA", "bogus")
    assert main(["run", "--once"]) == 2
    err = capsys.readouterr().err
    assert "setting 'schema'" in err and "'bogus'" in err


def test_unknown_env_variable_exits_2_suggesting_the_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FALCON_GPU_INTERVALL", "5")
    assert main(["run", "--once"]) == 2
    err = capsys.readouterr().err
    assert "FALCON_GPU_INTERVALL" in err and "did you mean FALCON_GPU_INTERVAL?" in err
    monkeypatch.delenv("FALCON_GPU_INTERVALL")
    monkeypatch.setenv("FALCON_GPU_ZZZQQQ", "1")
    with pytest.raises(ConfigError, match=r"FALCON_GPU_ZZZQQQ: unknown setting 'zzzqqq'$"):
        load_settings()


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[sinks]\ntype = "stdout"', "setting 'sinks': is a single table; write each entry as [[sinks]]"),
        (
            '[[sinks]]\ntype = "prometheus"',
            f"setting 'sinks.0': sink type 'prometheus' is not one of: {SINK_TYPES}",
        ),
        ('[[sinks]]\nurl = "http://x"', f"setting 'sinks.0': each sink needs a type, one of: {SINK_TYPES}"),
    ],
)
def test_sink_table_mistakes_are_named_plainly(tmp_path: Path, toml: str, expected: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(toml + "\n")
    with pytest.raises(ConfigError) as err:
        load_settings(cfg)
    assert expected in str(err.value)
    assert "Input tag" not in str(err.value) and "discriminator" not in str(err.value)


def test_names_are_case_insensitive(tmp_path: Path) -> None:
    assert _parser().parse_args(["run", "--log-level", "INFO"]).log_level == "info"
    cfg = tmp_path / "c.toml"
    cfg.write_text('log_level = "Debug"\nschema = "DCGM"\nkubernetes = "OFF"\n')
    s = load_settings(cfg)
    assert (s.log_level, s.schema_, s.kubernetes) == ("debug", "dcgm", "off")


# -- item 10: run --once says which sink dropped data ------------------------------------------
def test_run_once_exits_1_naming_each_sink_that_dropped(tmp_path: Path, peer: HttpPeer) -> None:
    refusing = HttpPeer()
    refusing.default = (400, {}, b"bad request")
    try:
        cfg = tmp_path / "c.toml"
        cfg.write_text(
            f'spool_dir = "{tmp_path / "spool"}"\n'
            f'[[sinks]]\ntype = "falcon_agent"\nname = "good"\nurl = "{peer.url}/v1/push"\n'
            f'[[sinks]]\ntype = "falcon_agent"\nname = "refusing"\nurl = "{refusing.url}/v1/push"\n'
        )
        proc = run_cli("run", "--once", "--simulate", "--config", str(cfg))
    finally:
        refusing.close()
    assert proc.returncode == 1, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "samples dropped" in ln]
    assert len(lines) == 1 and lines[0].startswith("falcon-gpu: sink refusing: "), proc.stderr
    assert peer.requests and refusing.requests  # both were tried; only one refused


def test_run_once_exits_0_when_everything_was_sent_or_spooled(tmp_path: Path, peer: HttpPeer) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'spool_dir = "{tmp_path / "spool"}"\n'
        f'[[sinks]]\ntype = "falcon_agent"\nname = "good"\nurl = "{peer.url}/v1/push"\n'
        '[[sinks]]\ntype = "falcon_agent"\nname = "down"\nurl = "http://127.0.0.1:1/v1/push"\n'
    )
    proc = run_cli("run", "--once", "--simulate", "--config", str(cfg))
    assert proc.returncode == 0, proc.stderr
    assert "dropped" not in proc.stderr
    assert any((tmp_path / "spool" / "down").iterdir())  # kept for the next start


# -- item 11 ---------------------------------------------------------------------------------
def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"falcon-gpu {__version__}\n"


def test_env_table_entries_nest_with_double_underscore() -> None:
    from falcon_gpu.settings_sources import read_env

    fields = {"labels": dict[str, str], "interval": float}
    env = {"FALCON_GPU_LABELS__CLUSTER": "prod-a", "FALCON_GPU_LABELS__ZONE": "b", "HOME": "/root"}
    assert read_env(fields, env) == {"labels": {"cluster": "prod-a", "zone": "b"}}
    assert read_env(fields, {"FALCON_GPU_LABELS": '{"a": "1"}'}) == {"labels": {"a": "1"}}
    with pytest.raises(ConfigError, match="FALCON_GPU_LABELS must be JSON"):
        read_env(fields, {"FALCON_GPU_LABELS": "a=1"})
