"""``install-plugin`` and the plugin as falcon-agent runs it (issue 8 items 15, 16): a bare
environment (``env -i``), from the directory ``install-plugin`` wrote, quiet on stderr."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from falcon_gpu.simulator.scenario.parse import resolve_scenario

ROOT = Path(__file__).resolve().parents[2]


def install(directory: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "install-plugin", str(directory), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def as_falcon_agent(plugin: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """How falcon-agent runs a plugin: the file itself, no environment, another directory. The one
    variable given is the settings cache's directory, so that a test does not write into the home of
    whoever runs it (without it the plugin uses ``~/.cache``, found through the passwd entry)."""
    cache = f"XDG_CACHE_HOME={cwd / 'cache'}"
    return subprocess.run(
        ["env", "-i", cache, str(plugin), *args], capture_output=True, text=True, timeout=60, cwd=cwd
    )


def _bare_metal_config(tmp_path: Path) -> Path:
    """No Kubernetes here (kubernetes = auto); the GPU processes exist in this host's /proc."""
    proc = tmp_path / "proc"
    for g in json.loads(resolve_scenario("default").read_text())["gpus"]:
        for p in g.get("processes", []):
            (proc / str(p["pid"])).mkdir(parents=True, exist_ok=True)
            (proc / str(p["pid"]) / "cgroup").write_text("0::/system.slice/trainer.service\n")
    cfg = tmp_path / "falcon-gpu.toml"
    cfg.write_text(
        f'node = "bare-1"\nspool_dir = "{tmp_path / "spool"}"\nproc_root = "{proc}"\n'
        f'kubelet_socket = "{tmp_path / "kubelet.sock"}"\nlog_root = "{tmp_path / "log"}"\n'
    )
    return cfg


def test_installed_plugin_runs_under_a_bare_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'node = "sim-node"\nspool_dir = "{tmp_path / "spool"}"\n')
    plugin_dir = tmp_path / "plugin" / "gpu"
    done = install(plugin_dir, "--config", os.path.relpath(cfg, ROOT))  # relative: made absolute
    assert done.returncode == 0, done.stderr
    plugin = plugin_dir / "60_gpu_monitor.py"
    assert plugin.stat().st_mode & stat.S_IXUSR
    assert plugin.read_text().splitlines()[0] == f"#!{os.path.abspath(sys.executable)}"
    assert str(cfg) in plugin.read_text()

    proc = as_falcon_agent(plugin, "--simulate", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    items = json.loads(proc.stdout)
    by = {(i["metric"], i["tags"]): i["value"] for i in items}
    assert by[("GPUCount", "")] == 4  # real readings, not []
    assert {i["endpoint"] for i in items} == {"sim-node"}  # the --config was passed on
    assert {i["step"] for i in items} == {60}


def test_bare_metal_plugin_logs_nothing(tmp_path: Path) -> None:
    plugin_dir = tmp_path / "plugin"
    assert install(plugin_dir, "--config", str(_bare_metal_config(tmp_path))).returncode == 0
    proc = as_falcon_agent(plugin_dir / "60_gpu_monitor.py", "--simulate", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stderr == ""
    items = json.loads(proc.stdout)
    assert {i["endpoint"] for i in items} == {"bare-1"} and len(items) > 20


def test_plugin_still_logs_warnings(tmp_path: Path) -> None:
    """Quiet is not mute: a failing part (here: no NVML on this machine) is still reported."""
    plugin_dir = tmp_path / "plugin"
    assert install(plugin_dir, "--config", str(_bare_metal_config(tmp_path))).returncode == 0
    proc = as_falcon_agent(plugin_dir / "60_gpu_monitor.py", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "[]\n")
    assert "WARNING" in proc.stderr and "NVML" in proc.stderr and " INFO " not in proc.stderr


@pytest.mark.parametrize("bad", ["interval = 0\n", None])
def test_install_plugin_refuses_a_config_the_plugin_could_not_use(tmp_path: Path, bad: str | None) -> None:
    cfg = tmp_path / "c.toml"
    if bad is not None:
        cfg.write_text(bad)
    proc = install(tmp_path / "plugin", "--config", str(cfg))
    assert proc.returncode == 2 and str(cfg) in proc.stderr, proc.stderr
    assert not (tmp_path / "plugin" / "60_gpu_monitor.py").exists()
