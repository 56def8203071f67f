"""Fixtures for attribution tests that go all the way to a store: a real Prometheus, and the
real CLI run once on a scenario file into it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.delivery.conftest import ManagedServer, start_prometheus

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[ManagedServer]:
    (tmp_path / "prometheus").mkdir()
    server = start_prometheus(tmp_path / "prometheus")
    yield server
    server.stop()


def run_once_into(prometheus: ManagedServer, scenario: Path, node: str) -> subprocess.CompletedProcess[str]:
    """``falcon-gpu run --once --simulate <scenario>`` remote-writing to ``prometheus``; asserts exit 0."""
    cfg = scenario.with_suffix(".toml")
    cfg.write_text(
        f'node = "{node}"\nspool_dir = "{scenario.parent / "spool"}"\n'
        f'[[sinks]]\ntype = "remote_write"\nurl = "{prometheus.url}/api/v1/write"\n'
    )
    argv = [
        sys.executable,
        "-m",
        "falcon_gpu",
        "run",
        "--once",
        "--simulate",
        str(scenario),
        "--config",
        str(cfg),
    ]
    run = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    return run
