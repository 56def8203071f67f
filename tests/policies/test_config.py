"""A bad ``[[policies]]`` table exits 2 naming the policy and the key, before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('name = "hot"\ntemperature_above = -3', "policy 'hot': key 'temperature_above'"),
        (
            'name = "hot"\ntemperature_above = 80\npower_above = 500',
            "policy 'hot': needs exactly one condition",
        ),
        ('name = "hot"', "policy 'hot': needs exactly one condition"),
        ('name = "hot"\ntemperture_above = 80', "policy 'hot': unknown key 'temperture_above'"),
        (
            'name = "x"\nhealth_fail = ["thermal", "heat"]',
            "policy 'x': key 'health_fail': unknown health check 'heat'",
        ),
        ('name = "x"\nxid = [79]\nfor = 100000', "policy 'x': key 'for'"),
        ('name = "x"\nxid = [79]\nalertmanager = ["am:9093"]', "policy 'x': key 'alertmanager'"),
        ('name = "x y"\nxid = [79]', "policy 'x y': key 'name'"),
        ("xid = [79]", "policy #1: key 'name'"),
    ],
)
def test_bad_policy_exits_2_naming_it(tmp_path: Path, table: str, expected: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'spool_dir = "{tmp_path}"\n[[policies]]\n{table}\n')
    proc = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "--once", "--config", str(cfg)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_two_policies_with_one_name_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'spool_dir = "{tmp_path}"\n' + '[[policies]]\nname = "a"\nxid = [79]\n' * 2)
    proc = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "run", "--simulate", "--once", "--config", str(cfg)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 2 and "two policies are named 'a'" in proc.stderr, proc.stderr
