"""The plugin's settings cache against a hostile local user (issue 19, item 5).

falcon-agent runs the plugin as root; the cache lives under ``$XDG_CACHE_HOME`` (or a
``HOME`` that sudo kept), which an unprivileged user may own. These tests run as root and
play that user with ``os.chown`` to uid 65534 (nobody): what the user plants must never be
written through, a directory they could write is not used, and no cache file, however
broken, makes the plugin fail.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import falcon_gpu.settings
from falcon_gpu.cli import main
from falcon_gpu.settings_cache import _digest, cache_dir, plugin_settings

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "plugins" / "60_gpu_monitor.py"
NOBODY = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="plays another user with os.chown: needs root")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in list(os.environ):
        if var.startswith("FALCON_GPU_") and var != "FALCON_GPU_JOBS_DIR":
            monkeypatch.delenv(var)
    monkeypatch.setenv("NODE_NAME", "cache-node")


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "root-owned" / "c.toml"
    cfg.parent.mkdir()
    cfg.write_text('labels = { team = "ml" }\n')
    return cfg


def _cache_name(config: Path) -> str:
    return f"plugin-settings-{_digest([str(config)])[:16]}.json"


def _counted_validations(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    calls: list[object] = []
    real = falcon_gpu.settings.load_settings

    def counted(*args: Any, **kwargs: Any) -> falcon_gpu.settings.Settings:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(falcon_gpu.settings, "load_settings", counted)
    return calls


def test_symlinks_planted_for_the_next_pids_are_never_written_through(tmp_path: Path) -> None:
    """The attack as the issue words it: nobody owns ``$XDG_CACHE_HOME`` and, before root's next
    plugin run, makes ``falcon-gpu`` there and plants ``.plugin-settings-<h>.json.<pid>``
    symlinks for the next few thousand PIDs, pointing at a root-owned file."""
    cfg = _config(tmp_path)
    victim = cfg.parent / "shadow"
    victim.write_text("root's file\n")
    xdg = tmp_path / "xdg"
    (xdg / "falcon-gpu").mkdir(parents=True)
    os.chown(xdg, NOBODY, NOBODY)
    os.chown(xdg / "falcon-gpu", NOBODY, NOBODY)
    last_pid = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    for pid in range(last_pid + 1, last_pid + 3000):
        link = xdg / "falcon-gpu" / f".{_cache_name(cfg)}.{pid}"
        link.symlink_to(victim)
        os.lchown(link, NOBODY, NOBODY)
    env = {**os.environ, "XDG_CACHE_HOME": str(xdg)}
    for _ in "12":
        proc = subprocess.run(
            [sys.executable, str(PLUGIN), "--simulate", "mixed-4gpu", "--config", str(cfg)],
            capture_output=True, text=True, timeout=60, cwd=ROOT, env=env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert len(json.loads(proc.stdout)) > 10
        assert f"{xdg / 'falcon-gpu'} is owned by uid {NOBODY}" in proc.stderr
    assert victim.read_text() == "root's file\n"
    assert sorted(p.name for p in (xdg / "falcon-gpu").iterdir() if not p.is_symlink()) == []


def test_a_cache_dir_that_is_a_symlink_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """nobody points ``$XDG_CACHE_HOME/falcon-gpu`` at a directory of root's."""
    cfg = _config(tmp_path)
    xdg = tmp_path / "xdg"
    xdg.mkdir()
    os.chown(xdg, NOBODY, NOBODY)
    (xdg / "falcon-gpu").symlink_to(cfg.parent)
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    caplog.set_level(logging.WARNING)
    assert plugin_settings(cfg, {}).labels == {"team": "ml"}
    assert sorted(p.name for p in cfg.parent.iterdir()) == ["c.toml"]
    assert "is a symbolic link" in caplog.text


def test_a_group_writable_cache_dir_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Root's own directory, but group-writable: a cache file in it could have been written by
    anyone in the group, so the plugin validates in full every run (warned each run, once)."""
    cfg = _config(tmp_path)
    directory = cache_dir()
    assert directory is not None
    directory.mkdir(mode=0o700)
    directory.chmod(0o770)
    calls = _counted_validations(monkeypatch)
    caplog.set_level(logging.WARNING)
    for _ in "12":
        assert plugin_settings(cfg, {}).labels == {"team": "ml"}
    assert len(calls) == 2 and list(directory.iterdir()) == []
    assert caplog.text.count("is writable by group or others (mode 0770)") == 2
    directory.chmod(0o700)  # fixed: the cache works again
    plugin_settings(cfg, {})
    plugin_settings(cfg, {})
    assert len(calls) == 3


def test_a_cache_file_100000_deep_does_not_fail_the_plugin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _config(tmp_path)
    assert main(["plugin", "--simulate", "mixed-4gpu", "--config", str(cfg)]) == 0
    first = json.loads(capsys.readouterr().out)
    directory = cache_dir()
    assert directory is not None
    (directory / _cache_name(cfg)).write_text("[" * 100_000 + "]" * 100_000)
    calls = _counted_validations(monkeypatch)
    assert main(["plugin", "--simulate", "mixed-4gpu", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert len(json.loads(out)) == len(first)
    assert len(calls) == 1  # validated in full, and the cache written again
    assert json.loads((directory / _cache_name(cfg)).read_text())["key"]
