"""Settings: sources and precedence, and every bad input exits 2 naming the setting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from falcon_gpu.settings import ConfigError, load_settings


def test_precedence_flags_over_env_over_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'interval = 10\nnode = "from-file"\nschema = "dcgm"\n[[sinks]]\ntype = "stdout"\nformat = "falcon"\n'
    )
    monkeypatch.setenv("FALCON_GPU_NODE", "from-env")
    s = load_settings(cfg, interval=5)
    assert (s.interval, s.node, s.schema_) == (5, "from-env", "dcgm")
    assert s.sinks[0].type == "stdout" and s.sinks[0].format == "falcon"  # type: ignore[union-attr]
    assert {"interval", "node"} <= s.explicit


def test_node_defaults_to_node_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_NAME", "gpu-node-7")
    assert load_settings().node == "gpu-node-7"


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ("interval = 0", "'interval'"),
        ("bogus = 1", "'bogus': unknown setting"),
        ('schema = "otel"', "'schema'"),
        ('[[sinks]]\ntype = "carrier_pigeon"', "'sinks.0'"),
        ('[[sinks]]\ntype = "stdout"\nformat = "xml"', "'sinks.0.stdout.format'"),
        ('[[sinks]]\ntype = "stdout"\n[[sinks]]\ntype = "stdout"', "two sinks are named 'stdout'"),
        ("interval = ", "not valid TOML"),
        ('[[sinks]]\ntype = "remote_write"\nurl = "127.0.0.1:9090/api/v1/write"', "url must be an http://"),
        (
            '[[sinks]]\ntype = "pushgateway"\nurl = "http//pg:9091"',
            "'sinks.0.pushgateway': url must be an http:// or https:// URL",
        ),
        (
            '[[sinks]]\ntype = "falcon_agent"\nurl = "ftp://u:hunter2@h/v1/push"',
            "'ftp://u:<redacted>@h/v1/push'",
        ),
    ],
)
def test_bad_settings_name_the_setting(tmp_path: Path, toml: str, needle: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(toml + "\n")
    with pytest.raises(ConfigError, match=None) as err:
        load_settings(cfg)
    assert needle in str(err.value)
    assert "hunter2" not in str(err.value)


def test_cli_exits_2_without_traceback(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("interval = -3\n")
    proc = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "run", "--once", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "'interval'" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "run", "--config", str(tmp_path / "none.toml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "run", "--interval", "abc"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_env_list_that_is_not_json_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FALCON_GPU_SINKS", "stdout")
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert "'sinks'" in str(err.value) and "FALCON_GPU_SINKS must be JSON" in str(err.value)
    monkeypatch.setenv("FALCON_GPU_SINKS", '[{"type": "pushgateway", "url": "http://127.0.0.1:9091"}]')
    assert load_settings().sinks[0].type == "pushgateway"


def test_unusable_spool_dir_exits_2_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'spool_dir = "{blocker}"\n[[sinks]]\ntype = "remote_write"\nurl = "http://127.0.0.1:9/api/v1/write"\n'
    )
    proc = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "--once", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "setting 'spool_dir'" in proc.stderr and "Traceback" not in proc.stderr


def test_two_loads_at_once_each_read_their_own_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A load paused between reading its file and building the settings (here: in the environment
    source) while another load of another file runs whole still gets its own file's values."""
    import threading

    from falcon_gpu import settings as settings_module

    first, second = tmp_path / "a.toml", tmp_path / "b.toml"
    first.write_text("interval = 11\n")
    second.write_text("interval = 22\n")
    paused, resume = threading.Event(), threading.Event()
    read_env = settings_module._EnvSource.__call__

    def slow_env(self: settings_module._EnvSource) -> dict[str, object]:
        if threading.current_thread().name == "first-load":
            paused.set()
            resume.wait(10)
        return read_env(self)

    monkeypatch.setattr(settings_module._EnvSource, "__call__", slow_env)
    got: list[float] = []
    loader = threading.Thread(target=lambda: got.append(load_settings(first).interval), name="first-load")
    loader.start()
    assert paused.wait(10), "the first load reached its environment source"
    assert load_settings(second).interval == 22
    resume.set()
    loader.join(10)
    assert got == [11], "the first load read its own file, not the second's (nor nothing)"
