"""The first hour of a new user, through the real CLI (issue 21, "Defaults a user can keep").

- ``--once`` tells the truth: a cron job must see that nothing arrived (a latest-state sink that
  did not deliver, or no NVML) in the exit code;
- the simulator never writes into a real node's paths;
- stdout is the sink only when none is configured, said once; a served agent does not flood it;
- a typo in the config file gets the environment's "did you mean".
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomllib

from tests.agent.test_cli_e2e import cli
from tests.delivery.conftest import ManagedServer, free_port, http_get, wait_until

ROOT = Path(__file__).resolve().parents[2]


def base_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FALCON_GPU_")}
    env["FALCON_GPU_SPOOL_DIR"] = str(tmp_path / "spool")
    env["FALCON_GPU_JOBS_DIR"] = str(tmp_path / "jobs")
    return env


def pushgateway_config(tmp_path: Path, url: str) -> Path:
    cfg = tmp_path / "pg.toml"
    cfg.write_text(f'node = "first-hour"\n[[sinks]]\ntype = "pushgateway"\nurl = "{url}"\n')
    return cfg


def test_once_exits_1_when_the_pushgateway_refuses_the_connection(tmp_path: Path) -> None:
    with socket.socket() as closed:  # a port nobody listens on: connection refused
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    cfg = pushgateway_config(tmp_path, url)
    done = cli("run", "--simulate", "--once", "--config", str(cfg), env=base_env(tmp_path))
    assert done.returncode == 1, done.stderr
    assert "sink pushgateway: the newest state was not delivered" in done.stderr
    assert "Traceback" not in done.stderr


def test_once_exits_0_when_the_pushgateway_has_the_state(pushgateway: ManagedServer, tmp_path: Path) -> None:
    cfg = pushgateway_config(tmp_path, pushgateway.url)
    done = cli("run", "--simulate", "--once", "--config", str(cfg), env=base_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "not delivered" not in done.stderr
    body = http_get(f"{pushgateway.url}/metrics").decode()
    assert 'falcon_gpu_up{instance="",job="falcon_gpu",node="first-hour"' in body or (
        "falcon_gpu_up{" in body and 'node="first-hour"' in body
    )


@pytest.mark.parametrize("command", [["run", "--once"], ["top", "--once"]])
def test_once_without_nvml_exits_1_saying_no_gpu_was_read(command: list[str], tmp_path: Path) -> None:
    env = base_env(tmp_path)
    env["LD_LIBRARY_PATH"] = str(tmp_path / "no-driver-here")  # the real pynvml finds no library
    done = cli(*command, env=env)
    assert done.returncode == 1, done.stderr
    assert "no GPU was read: NVML cannot start" in done.stderr
    assert "Traceback" not in done.stderr


def _tree(path: Path) -> dict[str, int]:
    if not path.exists():
        return {}
    return {str(p): p.stat().st_size for p in path.rglob("*") if p.is_file()}


@pytest.mark.skipif(os.geteuid() != 0, reason="the default paths are writable only for root")
def test_simulate_as_root_writes_nothing_under_the_real_nodes_paths(tmp_path: Path) -> None:
    """Before: simulated jobs landed in /var/lib/falcon-gpu/jobs/jobs.jsonl, where `stats` reads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FALCON_GPU_")}
    real = Path("/var/lib/falcon-gpu")
    before = _tree(real)
    for command in (["run", "--simulate", "job-node", "--once"], ["plugin", "--simulate", "job-node"]):
        done = cli(*command, env=env)
        assert done.returncode == 0, done.stderr
    assert _tree(real) == before


def test_a_simulated_runtime_keeps_spool_and_jobs_in_a_directory_it_removes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from falcon_gpu.agent.runtime import build
    from falcon_gpu.settings import Settings

    monkeypatch.delenv("FALCON_GPU_JOBS_DIR")

    settings = Settings()  # no spool_dir, no jobs_dir: the defaults under /var/lib/falcon-gpu
    assert {"spool_dir", "jobs_dir"}.isdisjoint(settings.explicit)
    rt = build(settings, simulate="job-node", with_jobs=True, with_sinks=False)
    try:
        spool, jobs = Path(rt.settings.spool_dir), Path(rt.settings.jobs_dir)
        assert spool.parent == jobs.parent and spool.parent.name.startswith("falcon-gpu-simulated-")
        assert rt.jobs is not None and jobs.is_dir()
    finally:
        rt.close(1.0)
    assert not jobs.parent.exists()
    given = Settings(spool_dir=tmp_path / "s")  # a path the user gave is used as given
    rt = build(given, simulate="default", with_sinks=False)
    try:
        assert rt.settings.spool_dir == tmp_path / "s"
    finally:
        rt.close(1.0)


def test_stdout_is_the_sink_only_when_none_is_configured_and_says_so_once(tmp_path: Path) -> None:
    done = cli("run", "--simulate", "--once", env=base_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "falcon_gpu_up{" in done.stdout
    said = [line for line in done.stderr.splitlines() if "no sinks configured" in line]
    assert len(said) == 1, done.stderr
    cfg = pushgateway_config(tmp_path, "http://127.0.0.1:9")  # a sink configured: no stdout, no line
    done = cli("run", "--simulate", "--once", "--config", str(cfg), env=base_env(tmp_path))
    assert "falcon_gpu_up{" not in done.stdout and "no sinks configured" not in done.stderr


def test_a_served_agent_writes_no_cycle_to_stdout_before_or_after_a_reload(tmp_path: Path) -> None:
    port = free_port()
    cfg = tmp_path / "served.toml"
    cfg.write_text(f'interval = 1\nlisten = "127.0.0.1:{port}"\n')  # no [[sinks]]: served only
    agent = subprocess.Popen(
        [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "--config", str(cfg)],
        env=base_env(tmp_path),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: b"falcon_gpu_up{" in _scrape(port), 60, "a served cycle")
        # a changed file and SIGHUP: the reload builds the runtime again, and it gets no stdout sink either
        cfg.write_text(f'interval = 1\nlisten = "127.0.0.1:{port}"\nlabels = {{cluster = "reloaded"}}\n')
        agent.send_signal(signal.SIGHUP)
        wait_until(lambda: b'cluster="reloaded"' in _scrape(port), 60, "the reloaded configuration served")
        time.sleep(2.5)  # a few more cycles after the reload
    finally:
        agent.send_signal(signal.SIGTERM)
        out, err = agent.communicate(timeout=60)
    assert "configuration reloaded" in err, err[-2000:]
    assert out == "", out[:500]
    assert "no sinks configured" not in err


def _scrape(port: int) -> bytes:
    try:
        return http_get(f"http://127.0.0.1:{port}/metrics", timeout=2)
    except OSError:
        return b""


def test_the_shipped_configs_have_no_stdout_sink_beside_real_ones() -> None:
    for path in (
        ROOT / "conf" / "falcon-gpu.toml",
        ROOT / "conf" / "kubernetes" / "base" / "falcon-gpu.toml",
    ):
        sinks = tomllib.loads(path.read_text()).get("sinks", [])
        assert all(s.get("type") != "stdout" for s in sinks), path


def test_the_image_listens_on_the_port_it_exposes() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "EXPOSE 9410" in text
    assert "FALCON_GPU_LISTEN=0.0.0.0:9410" in text


@pytest.mark.parametrize(
    ("toml", "hint"),
    [
        ("intervall = 30\n", "setting 'intervall': unknown setting; did you mean 'interval'?"),
        ("spool_dri = '/tmp/x'\n", "did you mean 'spool_dir'?"),
        (
            '[[sinks]]\ntype = "remote_write"\nurll = "http://127.0.0.1:9"\n',
            "setting 'sinks.0.remote_write.urll': unknown setting; did you mean 'url'?",
        ),
    ],
)
def test_a_typo_in_the_config_file_gets_did_you_mean(toml: str, hint: str, tmp_path: Path) -> None:
    cfg = tmp_path / "typo.toml"
    cfg.write_text(toml)
    done = cli("run", "--simulate", "--once", "--config", str(cfg), env=base_env(tmp_path))
    assert done.returncode == 2
    assert hint in done.stderr, done.stderr


def test_run_help_lists_the_bundled_scenarios(tmp_path: Path) -> None:
    done = cli("run", "--help", env=base_env(tmp_path))
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    folder = ROOT / "falcon_gpu" / "simulator" / "scenarios"
    names = sorted(p.stem for p in folder.glob("*.json"))
    assert len(names) >= 6
    for name in names:
        assert name in text
    assert "bundled scenarios for --simulate: default" in text


def test_version_comes_from_the_installed_metadata(tmp_path: Path) -> None:
    from importlib.metadata import version

    done = cli("--version", env=base_env(tmp_path))
    assert done.returncode == 0
    assert done.stdout.strip() == f"falcon-gpu {version('falcon-gpu')}"
