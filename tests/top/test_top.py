"""``falcon-gpu top``: one frame in a plain subprocess, and the live view in Debian's tmux."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.delivery.conftest import wait_until

ROOT = Path(__file__).resolve().parents[2]
ENV = {"PATH": "/usr/bin:/bin", "FALCON_GPU_NODE": "top-node", "TERM": "xterm"}


def once(scenario: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "top", "--simulate", scenario, "--once"],
        capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stdout  # --once is for scripts: no screen control
    return done.stdout


def rows(frame: str) -> list[list[str]]:
    return [line.split() for line in frame.splitlines()]


def test_once_shows_gpus_pods_and_processes_of_the_shared_gpu_scenario() -> None:
    frame = once("shared-gpu")
    lines = rows(frame)
    assert lines[0][:4] == ["falcon-gpu", "top", "node", "top-node"]
    assert "driver 550.54.15  CUDA 12.4" in frame.splitlines()[0]
    gpu0 = next(r for r in lines if r[:1] == ["0"])
    # the scenario's cycle 0: 85 % busy, 14 GiB of 40 used, 66 C, 320 W of 400
    assert gpu0 == ["0", "NVIDIA", "A100-SXM4-40GB", "85%", "14.0/40.0", "GiB", "66C", "320/400", "W", "ok"]
    # two notebooks share GPU 0, each with its own process, and a host process outside any pod
    assert ["team-a/jupyter-alice", "notebook", "30%", "4.0", "GiB", "1"] in lines
    assert ["team-a/jupyter-bob", "notebook", "25%", "3.0", "GiB", "1"] in lines
    assert ["pid", "8001", "python", "30%", "4.0", "GiB"] in lines
    # outside pods: device used - the pods' (14 - 9 GiB: contexts included), of which one host process
    assert ["(not", "in", "a", "pod)", "5%", "5.0", "GiB", "1"] in lines
    assert ["pid", "900", "dcgm-diag", "5%", "0.5", "GiB"] in lines
    # order: each pod and its processes sit under the GPU they use
    text = frame
    assert (
        text.index("jupyter-alice") < text.index("pid 8001") < text.index("jupyter-bob") < text.index("\n1 ")
    )
    idle = next(r for r in lines if r[:1] == ["ml/idle-reservation-0"])
    assert idle[:6] == ["ml/idle-reservation-0", "sleeper", "-", "0.0", "GiB", "0"] and "idle" in idle


def test_once_shows_health_lost_gpus_and_mig_instances() -> None:
    faulty = once("faulty-node")
    assert re.search(r"^0 .* 84C .*FAIL: thermal$", faulty, re.M)
    # at 80 columns the lost GPU's error is cut (the whole of it: test_fits_terminal at 200)
    assert re.search(r"^1 .* LOST \(nvml.*…$", faulty, re.M)
    mig = once("mig-node")
    assert re.search(r"research/bert-ft-0 \[MIG 1g\.10gb gi=9\] +trainer +- +3\.0 GiB +1$", mig, re.M)


def test_live_view_in_tmux_refreshes_and_stops_on_ctrl_c(tmux: list[str], tmp_path: Path) -> None:
    env = " ".join(f"{k}={v}" for k, v in ENV.items())
    rc = tmp_path / "rc"
    # the shell catches SIGINT itself (a trap, which its child does not inherit) and records how
    # top exited: tmux 3.3 does not always fill #{pane_dead_status} for the pane's own process
    command = (
        f"trap : INT; cd {ROOT} && env {env} {sys.executable} -m falcon_gpu top --simulate shared-gpu "
        f"--interval 1; echo $? > {rc}"
    )
    subprocess.run([*tmux, "new-session", "-d", "-s", "top", "-x", "160", "-y", "60", command], check=True)

    def screen() -> str:
        return subprocess.run(
            [*tmux, "capture-pane", "-p", "-t", "top"], capture_output=True, text=True
        ).stdout

    def wait(check: Callable[[], bool], timeout: float, what: str) -> None:
        try:
            wait_until(check, timeout, what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the pane shows:\n{screen()}") from None

    wait(lambda: "jupyter-bob" in screen(), 60, "the first frame in tmux")
    first = screen()
    assert "team-a/jupyter-alice" in first and "team-a/jupyter-bob" in first
    assert "every 1s" in first and first.count("falcon-gpu top") == 1  # redrawn in place, not scrolled
    stamp = first.splitlines()[0]
    wait(lambda: screen().splitlines()[0] != stamp, 30, "a second frame")
    # cycle 2 of the scenario: GPU 0 at 70 %
    wait(lambda: re.search(r"^0 +NVIDIA A100-SXM4-40GB +70%", screen(), re.M) is not None, 30, "cycle 2")
    subprocess.run([*tmux, "send-keys", "-t", "top", "C-c"], check=True)
    wait(lambda: rc.exists() and rc.read_text() != "", 30, "top to exit on Ctrl-C")
    assert rc.read_text().strip() == "0"
