"""Committed files a script in scripts/ writes: the test that they are what it writes now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def assert_generated_files_current(script: str) -> None:
    """``scripts/<script> --check`` exits 0: nobody edited the output by hand or forgot to rerun it."""
    answer = subprocess.run(
        [sys.executable, str(SCRIPTS / script), "--check"], capture_output=True, text=True, timeout=60
    )
    assert answer.returncode == 0, answer.stderr
