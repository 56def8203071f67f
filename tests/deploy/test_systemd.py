"""conf/systemd/falcon-gpu.service: systemd accepts every line, and it keeps what the agent needs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from falcon_gpu.agent.commands import FLUSH_TIMEOUT
from falcon_gpu.agent.loop import STUCK_AFTER_S
from falcon_gpu.settings import Settings

UNIT = Path(__file__).resolve().parents[2] / "conf" / "systemd" / "falcon-gpu.service"
INSTALLED = "/opt/falcon-gpu/bin/falcon-gpu"


def directives() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def verify(unit: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("systemd-analyze")
    if binary is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    return subprocess.run([binary, "verify", str(unit)], capture_output=True, text=True, timeout=60)


def test_systemd_analyze_verify_accepts_every_line(tmp_path: Path) -> None:
    # verify also checks that ExecStart exists: point it at this installation's falcon-gpu
    here = str(Path(sys.executable).parent / "falcon-gpu")
    assert Path(here).exists(), here
    unit = tmp_path / "falcon-gpu.service"
    unit.write_text(UNIT.read_text().replace(INSTALLED, here))
    done = verify(unit)
    assert done.returncode == 0 and done.stderr == "", done.stderr  # warnings (unknown keys) included


def test_verify_would_catch_a_bad_line(tmp_path: Path) -> None:
    unit = tmp_path / "falcon-gpu.service"
    unit.write_text(UNIT.read_text().replace("Restart=on-failure", "Restart=sometimes"))
    assert "restart specifier" in verify(unit).stderr


def test_the_unit_keeps_what_the_agent_needs() -> None:
    d = directives()
    assert d["ExecStart"] == [f"{INSTALLED} run --config /etc/falcon-gpu/falcon-gpu.toml"]
    assert d["Restart"] == ["on-failure"] and d["RestartPreventExitStatus"] == ["2"]
    assert d["ExecReload"] == ["/bin/kill -HUP $MAINPID"]  # SIGHUP reloads the configuration
    # the spool default lives in the state directory systemd creates for the service
    assert Settings(node="n").spool_dir.parent == Path("/var/lib") / d["StateDirectory"][0]
    assert float(d["TimeoutStopSec"][0]) >= FLUSH_TIMEOUT + STUCK_AFTER_S
    # NVML must still open /dev/nvidiactl and /dev/nvidia<N>; /proc of every PID stays visible
    assert d["PrivateDevices"] == ["no"] and d["DevicePolicy"] == ["closed"]
    assert {"/dev/nvidiactl rw", "char-nvidia-frontend rw"} <= set(d["DeviceAllow"])
    assert d["ProtectProc"] == ["default"] and d["ProcSubset"] == ["all"]
    assert d["ProtectSystem"] == ["strict"] and d["NoNewPrivileges"] == ["yes"]
