"""``top`` fits the terminal: in tmux at 80x24, 120x40 and 200x50 the header and every GPU row
stay on the screen, no line wraps, pods that do not fit are summarised ("+3 pods") and shown by
scrolling, and ``q`` quits with 0 (issue 21)."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.delivery.conftest import wait_until

ROOT = Path(__file__).resolve().parents[2]
ENV = {"PATH": "/usr/bin:/bin", "FALCON_GPU_NODE": "top-node", "TERM": "xterm", "LANG": "C.UTF-8"}
SIZES = [(80, 24), (120, 40), (200, 50)]
SHARED_PODS = ["team-a/jupyter-alice", "team-a/jupyter-bob", "team-b/dashboard-render-6f7c9", "ml/pipeline-0"]


def sixteen_gpus(path: Path) -> Path:
    """shared-gpu's four GPUs, then twelve copies of them (own uuid, bus id and index), each
    copy allocated to two pods of its own: 16 GPUs, 37 lines under them."""
    scenario = json.loads((ROOT / "falcon_gpu/simulator/scenarios/shared-gpu.json").read_text())
    gpus, allocations = scenario["gpus"], scenario["host"]["pod_resources"]
    for i in range(4, 16):
        gpu = copy.deepcopy(gpus[i % 4]) | {"processes": []}
        gpu["uuid"], gpu["pci_bus_id"] = (
            f"GPU-00000000-0000-4000-8000-{i:012x}",
            f"00000000:{0x80 + i:02X}:00.0",
        )
        gpus.append(gpu)
        for pod in (f"train-{i}", f"eval-{i}"):
            device = {"resource_name": "nvidia.com/gpu", "device_ids": [gpu["uuid"]]}
            allocations.append(
                {"namespace": "batch", "name": pod, "containers": [{"name": "main", "devices": [device]}]}
            )
    path.write_text(json.dumps(scenario))
    return path


class Pane:
    """``falcon-gpu top`` in a tmux pane of a given size; the shell records its exit status."""

    def __init__(
        self,
        tmux: list[str],
        scenario: str | Path,
        size: tuple[int, int],
        tmp: Path,
        *,
        args: str = "--interval 1",
        env: dict[str, str] | None = None,
    ) -> None:
        self.tmux, self.width, self.height, self.rc = tmux, size[0], size[1], tmp / "rc"
        variables = " ".join(f"{k}={v}" for k, v in (ENV | (env or {})).items())
        command = (
            f"cd {ROOT} && env {variables} {sys.executable} -m falcon_gpu top --simulate {scenario} "
            f"{args}; echo $? > {self.rc}; sleep 60"
        )
        subprocess.run(
            [*tmux, "new-session", "-d", "-s", "top", "-x", str(size[0]), "-y", str(size[1]), command],
            check=True,
        )

    def screen(self) -> list[str]:
        """The pane's lines, a wrapped line joined back (``-J``): a line wider than the pane shows."""
        out = subprocess.run(
            [*self.tmux, "capture-pane", "-p", "-J", "-t", "top"], capture_output=True, text=True
        )
        return [line.rstrip() for line in out.stdout.rstrip("\n").split("\n")]

    def wait(self, check: Callable[[list[str]], bool], what: str, timeout: float = 30) -> list[str]:
        try:
            wait_until(lambda: check(self.screen()), timeout, what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the pane shows:\n" + "\n".join(self.screen())) from None
        return self.screen()

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", "top", *keys], check=True)

    def quit_status(self) -> str:
        self.keys("q")
        wait_until(lambda: self.rc.exists() and self.rc.read_text() != "", 30, "top to exit on q")
        return self.rc.read_text().strip()


def gpu_rows(lines: list[str]) -> dict[int, str]:
    return {int(m[1]): line for line in lines if (m := re.match(r"(\d+) +NVIDIA ", line))}


def fits(lines: list[str], width: int, gpus: int) -> bool:
    """The header on top, every GPU row below it, no line wider than the pane."""
    return (
        len(lines) > 2
        and lines[0].startswith("falcon-gpu top  node top-node")
        and lines[1].startswith("GPU MODEL")
        and sorted(gpu_rows(lines)) == list(range(gpus))
        and all(len(line) <= width for line in lines)
    )


def pods(lines: list[str]) -> set[str]:
    return {m[1] for line in lines if (m := re.match(r" {4}([a-z0-9-]+/[a-z0-9-]+) ", line))}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_shared_gpu_fits_whole_and_quits_on_q(tmux: list[str], tmp_path: Path, size: tuple[int, int]) -> None:
    pane = Pane(tmux, "shared-gpu", size, tmp_path)
    lines = pane.wait(lambda s: fits(s, size[0], 4) and "ml/idle-reservation-0" in "\n".join(s), "the frame")
    assert set(SHARED_PODS) <= pods(lines)  # 20 lines: all of it fits, nothing is summarised
    assert not any(" pod" in row for row in gpu_rows(lines).values())
    pane.keys("Down", "NPage")  # nothing to scroll: the frame stays whole
    lines = pane.wait(lambda s: fits(s, size[0], 4), "the frame after the keys")
    assert set(SHARED_PODS) <= pods(lines)
    assert pane.quit_status() == "0"


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_sixteen_gpus_stay_on_screen_and_their_pods_scroll(
    tmux: list[str], tmp_path: Path, size: tuple[int, int]
) -> None:
    width, height = size
    pane = Pane(tmux, sixteen_gpus(tmp_path / "sixteen.json"), size, tmp_path)
    # under title, two headers, 16 GPU rows and the line that says so: the pane's own height
    footer = f"lines 1-{height - 20} of 37 under the GPUs  "
    lines = pane.wait(lambda s: fits(s, width, 16) and s[-1].startswith(footer), "16 GPU rows, a window")
    assert len(lines) == height
    # the last GPU's pods are below the window: its row says how many
    assert gpu_rows(lines)[15].endswith("  +2 pods") and "batch/train-15" not in pods(lines)
    seen = pods(lines)
    pane.keys("Down")
    lines = pane.wait(lambda s: s[-1].startswith("lines 2-"), "the window one line down")
    seen |= pods(lines)
    for _ in range(37):  # a page at a time, never more pages than lines
        if "batch/eval-15" in seen:
            break
        pane.keys("NPage")
        before = lines[-1]

        def moved(s: list[str], before: str = before) -> bool:
            return s[-1] != before and fits(s, width, 16)

        lines = pane.wait(moved, "PgDn")
        assert fits(lines, width, 16) and len(lines) <= height
        seen |= pods(lines)
    assert {"batch/train-15", "batch/eval-15"} <= pods(lines)
    assert gpu_rows(lines)[15].endswith(" ok")  # its pods are on the screen: no summary
    assert set(SHARED_PODS) <= seen and {f"batch/train-{i}" for i in range(4, 16)} <= seen
    end = lines[-1]
    pane.keys("PPage", "Up")
    lines = pane.wait(lambda s: s[-1] != end and fits(s, width, 16), "PgUp and Up")
    assert "batch/eval-15" not in pods(lines)
    assert pane.quit_status() == "0"


def test_once_is_80_columns_when_not_a_terminal(tmp_path: Path) -> None:
    scenario = sixteen_gpus(tmp_path / "sixteen.json")
    done = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "top", "--simulate", str(scenario), "--once"],
        capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert sorted(gpu_rows(lines)) == list(range(16)) and "batch/eval-15" in pods(lines)  # piped: every line
    wide = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "top", "--simulate", "faulty-node", "--once"],
        capture_output=True, text=True, cwd=ROOT, env=ENV | {"COLUMNS": "200"}, timeout=60,
    )  # fmt: skip
    assert re.search(
        r"^1 .* LOST \(nvmlDeviceGetMemoryInfo: GPU is lost \(NVML_ERROR code 15\)\)$", wide.stdout, re.M
    )


def test_a_resized_pane_is_redrawn_to_its_new_size(tmux: list[str], tmp_path: Path) -> None:
    pane = Pane(tmux, sixteen_gpus(tmp_path / "sixteen.json"), (200, 50), tmp_path)
    pane.wait(lambda s: fits(s, 200, 16) and s[-1].startswith("lines 1-30 "), "the frame at 200x50")
    subprocess.run([*tmux, "resize-window", "-t", "top", "-x", "80", "-y", "24"], check=True)
    lines = pane.wait(lambda s: fits(s, 80, 16) and s[-1].startswith("lines 1-4 "), "the frame at 80x24")
    assert len(lines) == 24 and gpu_rows(lines)[15].endswith("  +2 pods")
    assert pane.quit_status() == "0"


def test_once_on_a_terminal_fits_its_height_too(tmux: list[str], tmp_path: Path) -> None:
    pane = Pane(tmux, sixteen_gpus(tmp_path / "sixteen.json"), (80, 24), tmp_path, args="--once")
    lines = pane.wait(lambda s: len(s) > 20, "the frame")
    assert fits(lines, 80, 16) and len(lines) == 23  # the title is still on the screen
    assert gpu_rows(lines)[15].endswith("  +2 pods") and lines[-1].endswith("(the live view scrolls)")
    wait_until(lambda: pane.rc.exists() and pane.rc.read_text() != "", 30, "top --once to exit")
    assert pane.rc.read_text().strip() == "0"


def test_the_live_view_without_a_terminal_says_to_use_once() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "top", "--simulate", "shared-gpu"],
        capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "top --once" in done.stderr and done.stdout == ""


def test_a_terminal_curses_does_not_know_exits_2_pointing_at_once(tmux: list[str], tmp_path: Path) -> None:
    pane = Pane(tmux, "shared-gpu", (80, 24), tmp_path, env={"TERM": "no-such-terminal"})
    lines = pane.wait(lambda s: "prints one frame" in "\n".join(s), "the message")
    assert "falcon-gpu: top cannot draw here (setupterm: could not find terminal)" in lines[0]
    wait_until(lambda: pane.rc.exists() and pane.rc.read_text() != "", 30, "top to exit")
    assert pane.rc.read_text().strip() == "2"
