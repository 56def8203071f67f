"""``falcon-gpu doctor``: a readable table, exit 0 only when everything passes, no secrets."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )


def test_simulated_node_passes_every_check() -> None:
    proc = doctor("--simulate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = proc.stdout.splitlines()
    assert any(r.startswith("OK") and "NVML" in r and "4 GPU(s)" in r for r in rows)
    assert sum(1 for r in rows if re.match(r"OK\s+GPU \d", r)) == 4
    assert any("kubelet socket" in r and r.startswith("OK") for r in rows)
    assert any("GPU processes attributed" in r and "4 of 4" in r for r in rows)
    assert "checks passed" in rows[-1]


def test_missing_driver_and_dead_sink_fail_with_a_fix_and_no_secret(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cr3t-t0ken\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'spool_dir = "{tmp_path / "spool"}"\nkubelet_socket = "{tmp_path / "none.sock"}"\n'
        'kubernetes = "on"\n'
        f'[[sinks]]\ntype = "remote_write"\nurl = "http://127.0.0.1:1/api/v1/write"\n'
        f'bearer_token_file = "{token}"\ntimeout = 1\n'
    )
    proc = doctor("--config", str(cfg))
    assert proc.returncode == 1
    out = proc.stdout
    assert "FAIL  NVML" in out and "libnvidia-ml" in out
    assert any(r.startswith("FAIL") and "kubelet socket" in r for r in out.splitlines())
    assert any(r.startswith("FAIL") and "sink remote_write" in r for r in out.splitlines())
    assert "s3cr3t" not in out + proc.stderr
