"""The plugin's validated-settings cache (issue 9, plugin start-up): later runs skip pydantic,
yet print what a full validation would, and any changed input is validated again, so a bad
setting gives its message on every run, not only on the first."""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import falcon_gpu.cli
import falcon_gpu.settings
import falcon_gpu.settings_cache
from falcon_gpu.cli import main
from falcon_gpu.schemas.selection import MetricSelection
from falcon_gpu.settings_cache import cache_dir, plugin_settings
from falcon_gpu.settings_resolved import LEFT_OUT, ResolvedSettings
from falcon_gpu.settings_sources import ConfigError
from falcon_gpu.simulator.scenario.parse import resolve_scenario
from tests.agent.probe import run_probe
from tests.delivery.test_http_outcomes import make_ca_and_server_cert

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "plugins" / "60_gpu_monitor.py"
HEAVY = ("pydantic", "pydantic_core", "pydantic_settings", "grpc", "requests", "google", "apscheduler",
         "tenacity", "cramjam", "asyncio", "tomllib", "urllib3")  # fmt: skip
"""Packages the plugin's cached path must not import (each is tens of ms of every start)."""
LAZY = ("falcon_gpu.attribution.sources.kubelet", "falcon_gpu.attribution.sources.logs",
        "falcon_gpu.attribution.sources.pod_labels", "falcon_gpu.attribution.sources.containers",
        "falcon_gpu.attribution.podresources", "falcon_gpu.attribution.dra_claims",
        "falcon_gpu.attribution.logdirs", "falcon_gpu.attribution.kube_api")  # fmt: skip
"""Modules the plugin path leaves alone unless it needs them (each was imported once; a top-level
import coming back fails the guard): the attribution sources that do not apply on a node without a
kubelet, Docker, Podman or ``pod_labels`` (the registry imports a source's module once it applies) and
what they import."""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in list(os.environ):
        if var.startswith("FALCON_GPU_") and var != "FALCON_GPU_JOBS_DIR":
            monkeypatch.delenv(var)
    monkeypatch.setenv("NODE_NAME", "cache-node")
    monkeypatch.setenv("GRPC_VERBOSITY", "")


def _no_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on a full validation fails the test: only the cache may answer."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("validated again although nothing changed")

    monkeypatch.setattr(falcon_gpu.settings, "load_settings", refuse)


def _cache_files() -> list[Path]:
    directory = cache_dir()
    assert directory is not None
    return sorted(directory.glob("plugin-settings-*.json")) if directory.is_dir() else []


def _plugin(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str]:
    assert main(["plugin", *args]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def _without_timestamps(out: str) -> str:
    return re.sub(r'"timestamp":\d+', '"timestamp":0', out)


# -- the cached path: no pydantic, same output ---------------------------------------------------
PROBE = """
import contextlib, io, json, sys
from falcon_gpu.cli import main
from falcon_gpu.schemas.selection import MetricSelection
with contextlib.redirect_stdout(io.StringIO()) as out:
    main(["plugin", "--simulate", sys.argv[1]])
heavy = sorted(set(sys.modules) & set(sys.argv[2:]))
print(json.dumps({"heavy": heavy, "items": len(json.loads(out.getvalue()))}))
"""


def _probe(scenario: Path) -> dict[str, object]:
    """One plugin run on a node without a kubelet, its log dirs, Docker or Podman, whatever the
    machine running the test has."""
    missing = scenario.parent / "not-on-this-node"
    env = {**os.environ, "FALCON_GPU_KUBELET_SOCKET": str(missing / "kubelet.sock"),
           "FALCON_GPU_LOG_ROOT": str(missing), "FALCON_GPU_DOCKER_ROOT": str(missing),
           "FALCON_GPU_CONTAINERS_ROOT": str(missing)}  # fmt: skip
    return run_probe(PROBE, str(scenario), *HEAVY, *LAZY, env=env)


def test_second_run_loads_no_pydantic_grpc_or_requests(tmp_path: Path) -> None:
    """A node without a kubelet socket (a host-less scenario): gRPC is imported only to talk to one."""
    scenario = json.loads(resolve_scenario("mixed-4gpu").read_text())
    del scenario["host"]
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(scenario))
    first = _probe(path)
    assert "pydantic" in first["heavy"]  # type: ignore[operator]  # the first run validates
    (cached,) = _cache_files()
    assert cached.stat().st_mode & 0o777 == 0o600
    second = _probe(path)
    assert second == {"heavy": [], "items": first["items"]}
    assert isinstance(second["items"], int) and second["items"] > 20


def test_importing_the_plugin_path_loads_none_of_them() -> None:
    """Whether or not a cache exists: the modules the plugin runs import the heavy ones lazily."""
    code = (
        "import sys\n"
        "import falcon_gpu.cli, falcon_gpu.agent.commands, falcon_gpu.agent.runtime\n"
        "import falcon_gpu.settings_cache\n"
        "print(sorted(set(sys.modules) & set(sys.argv[1:])))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *HEAVY, *LAZY], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_cached_output_is_byte_identical_to_the_validated_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('labels = { team = "ml" }\nprocess_metrics = true\n')
    first, _ = _plugin(capsys, "--simulate", "shared-gpu", "--config", str(cfg))
    _no_validation(monkeypatch)
    second, err = _plugin(capsys, "--simulate", "shared-gpu", "--config", str(cfg))
    assert _without_timestamps(second) == _without_timestamps(first)
    items = json.loads(second)
    assert {i["endpoint"] for i in items} == {"cache-node"}
    assert all("team=ml" in i["tags"] for i in items)
    assert any(i["metric"] == "PodGPUUtils" for i in items)  # attribution ran on the simulated host
    assert err == ""


def test_plugin_output_equals_run_once_openfalcon(tmp_path: Path) -> None:
    """The plugin and ``run --once`` with a stdout sink in Open-Falcon format print the same items."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'interval = 60\nspool_dir = "{tmp_path / "spool"}"\n[[sinks]]\ntype = "stdout"\nformat = "falcon"\n'
    )

    def out(*cmd: str) -> str:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        return _without_timestamps(proc.stdout)

    once = out(
        sys.executable, "-m", "falcon_gpu", "run", "--once", "--simulate", "shared-gpu", "--config", str(cfg)
    )
    plugin = [
        out(sys.executable, str(PLUGIN), "--simulate", "shared-gpu", "--config", str(cfg)) for _ in "12"
    ]
    assert plugin == [once, once]  # validated, then from the cache
    assert len(json.loads(once)) > 20


# -- what invalidates the cache --------------------------------------------------------------
def test_an_edited_config_is_validated_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('node = "a"\n')
    assert plugin_settings(cfg, {}).node == "a"
    cfg.write_text('node = "b"\n')
    assert plugin_settings(cfg, {}).node == "b"
    _no_validation(monkeypatch)
    assert plugin_settings(cfg, {}).node == "b"
    assert len(_cache_files()) == 1  # one file per config path, rewritten


def test_a_bad_setting_is_reported_on_every_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('node = "fine"\n')
    assert plugin_settings(cfg, {}).node == "fine"
    cfg.write_text("interval = -1\n")
    for _ in range(3):
        out, err = _plugin(capsys, "--config", str(cfg))
        assert out == "[]\n"
        assert "setting 'interval'" in err and "greater than 0" in err
    assert "fine" in _cache_files()[0].read_text()  # never replaced by the invalid one


@pytest.mark.parametrize(
    ("var", "value", "named"),
    [
        ("FALCON_GPU_INTERVAL", "-1", "setting 'interval'"),
        ("FALCON_GPU_INTERVL", "5", "FALCON_GPU_INTERVL: unknown setting"),
        ("FALCON_GPU_SINKS", "not json", "setting 'sinks'"),
    ],
)
def test_a_bad_variable_after_a_cached_run_is_reported(
    var: str, value: str, named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin_settings(None, {})
    monkeypatch.setenv(var, value)
    for _ in range(2):
        with pytest.raises(ConfigError, match=re.escape(named)):
            plugin_settings(None, {})


def test_node_name_and_flags_are_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    assert plugin_settings(None, {}).node == "cache-node"
    monkeypatch.setenv("NODE_NAME", "other-node")
    assert plugin_settings(None, {}).node == "other-node"
    assert plugin_settings(None, {"log_level": "debug"}).log_level == "debug"
    assert plugin_settings(None, {"log_level": None}).log_level == "info"


def test_a_new_package_version_is_validated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    plugin_settings(None, {})
    monkeypatch.setattr(falcon_gpu.settings_cache, "__version__", "99.0")
    calls: list[object] = []
    real = falcon_gpu.settings.load_settings

    def counted(*args: Any, **kwargs: Any) -> falcon_gpu.settings.Settings:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(falcon_gpu.settings, "load_settings", counted)
    plugin_settings(None, {})
    assert len(calls) == 1


def _a_ca_file(tmp_path: Path) -> Path:
    bundle = ssl.get_default_verify_paths().cafile
    if bundle and Path(bundle).is_file():
        return Path(shutil.copy(bundle, tmp_path / "ca.pem"))
    return make_ca_and_server_cert(tmp_path)[0]


def test_a_file_the_settings_name_is_checked_again_when_it_changes(tmp_path: Path) -> None:
    """Validation reads TLS files: a CA file replaced by garbage is reported on the next run."""
    ca = _a_ca_file(tmp_path)
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[[sinks]]\ntype = "remote_write"\nurl = "https://127.0.0.1:9/api/v1/write"\nca_file = "{ca}"\n'
    )
    plugin_settings(cfg, {})
    ca.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match="ca_file"):
        plugin_settings(cfg, {})
    ca.unlink()
    with pytest.raises(ConfigError, match="ca_file"):
        plugin_settings(cfg, {})


# -- secrets, and a cache that cannot be used ------------------------------------------------------
def test_no_secret_reaches_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = tmp_path / "token"
    token.write_text("file-secret-123\n")
    sinks = [
        {"type": "remote_write", "url": "http://127.0.0.1:9/w", "headers": {"X-Api-Key": "env-secret-456"}},
        {"type": "pushgateway", "url": "http://127.0.0.1:9", "bearer_token_file": str(token)},
    ]
    monkeypatch.setenv("FALCON_GPU_SINKS", json.dumps(sinks))
    plugin_settings(None, {})
    (cached,) = _cache_files()
    text = cached.read_text()
    assert "env-secret-456" not in text and "file-secret-123" not in text
    assert str(token) in text  # the path is named (its stat is part of the check), never the content


def _edited(cached: Path, *, summed: bool = False, **values: object) -> str:
    """The cache file with other values (``summed``: and their digest, as one who read the code would)."""
    body = json.loads(cached.read_text())
    body["settings"]["values"].update(values)
    if summed:
        body["sum"] = falcon_gpu.settings_cache._sum(body["settings"])
    return json.dumps(body)


def test_a_corrupt_cache_is_rebuilt(monkeypatch: pytest.MonkeyPatch) -> None:
    plugin_settings(None, {})
    (cached,) = _cache_files()
    for garbage in (
        "{",
        '{"key": 1}',
        json.dumps({**json.loads(cached.read_text()), "settings": {"node": 3}}),
        _edited(cached, interval=True),  # parses, but is not what was written
    ):
        cached.write_text(garbage)
        assert plugin_settings(None, {}).node == "cache-node"
    _no_validation(monkeypatch)
    assert plugin_settings(None, {}).node == "cache-node"


def test_a_cache_file_others_could_write_is_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    plugin_settings(None, {})
    (cached,) = _cache_files()
    cached.write_text(_edited(cached, summed=True, node="planted"))
    cached.chmod(0o666)
    assert plugin_settings(None, {}).node == "cache-node"  # validated again, and rewritten 0600
    assert cached.stat().st_mode & 0o777 == 0o600
    _no_validation(monkeypatch)
    assert plugin_settings(None, {}).node == "cache-node"


def test_an_unwritable_cache_dir_only_costs_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    out, err = _plugin(capsys, "--simulate", "mixed-4gpu")
    assert len(json.loads(out)) > 10 and err == ""
    assert list(tmp_path.iterdir()) == [blocker]


def test_resolved_settings_are_the_settings_but_the_outputs_and_round_trip() -> None:
    """Derived from ``Settings`` (no second list): a setting added there reaches the plugin."""
    settings = falcon_gpu.settings.load_settings(None, labels={"a": "b"}, log_level="debug")
    resolved = ResolvedSettings.of(settings)
    assert ResolvedSettings.from_json(json.loads(json.dumps(resolved.to_json()))) == resolved
    assert set(falcon_gpu.settings.Settings.model_fields) > LEFT_OUT
    for name in falcon_gpu.settings.Settings.model_fields:
        if name in LEFT_OUT:
            assert not hasattr(resolved, name), name
        elif name != "metrics":  # compiled: checked below
            assert getattr(resolved, name) == getattr(settings, name), name
    # the whole [metrics] table, its profile too (it was left out: the plugin read "full")
    assert (
        resolved.metrics
        == MetricSelection((), (), "default")
        == MetricSelection((), (), settings.metrics.profile)
    )
    assert resolved.explicit == settings.explicit >= {"labels", "log_level"}
    assert resolved.model_copy(update={"node": "b"}).node == "b" and resolved.node == "cache-node"


def test_a_setting_added_to_settings_reaches_the_plugin_without_another_edit() -> None:
    class Wider(falcon_gpu.settings.Settings):
        new_reading_option: int = 7

    resolved = ResolvedSettings.of(Wider())
    assert getattr(resolved, "new_reading_option") == 7  # noqa: B009  # not a Settings field to mypy
    back = ResolvedSettings.from_json(json.loads(json.dumps(resolved.to_json())))
    assert getattr(back, "new_reading_option") == 7  # noqa: B009


def test_the_cache_dir_under_falcon_agents_empty_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``env -i``: no XDG_CACHE_HOME, no HOME; the passwd entry names the home (a relative
    XDG_CACHE_HOME is ignored, as the XDG spec says)."""
    import pwd

    monkeypatch.delenv("HOME", raising=False)
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    assert cache_dir({}) == home / ".cache" / "falcon-gpu"
    assert cache_dir({"XDG_CACHE_HOME": "relative"}) == home / ".cache" / "falcon-gpu"
    assert cache_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/falcon-gpu")


# -- the plugin's flags -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--bogus"], "--bogus"),
        (["--simulate", "shared-gpu", "extra"], "extra"),
        (["--log-level", "loud"], "--log-level"),
        (["--config"], "--config"),
        (["--log-level=", "--simulate"], "--log-level"),
    ],
)
def test_a_bad_plugin_flag_exits_2_naming_it(argv: list[str], named: str) -> None:
    """falcon-agent's log is where a typo in the plugin's line shows: the parser's message."""
    proc = subprocess.run(
        [sys.executable, str(PLUGIN), *argv], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert named in proc.stderr and proc.stderr.startswith("usage: falcon-gpu")


def test_plugin_help_is_the_full_parsers() -> None:
    proc = subprocess.run(
        [sys.executable, str(PLUGIN), "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 0
    assert "--simulate [SCENARIO]" in proc.stdout and "--log-level {debug,info,warning,error}" in proc.stdout
