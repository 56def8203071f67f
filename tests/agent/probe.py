"""Run a probe script in a fresh interpreter and read the JSON it prints.

The start-up tests (plugin cache, value classes, deferred imports) must see what a new process
loads, which an import inside the test process cannot show (pytest has loaded most of it already).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_probe(
    code: str, *args: str, flags: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> dict[str, Any]:
    """``python [flags] -c code args...`` from the repository root; its stdout's JSON object."""
    proc = subprocess.run(
        [sys.executable, *flags, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result
