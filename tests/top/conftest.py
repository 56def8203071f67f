"""tmux for the live view's tests: one server per test, on its own socket."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture
def tmux() -> Iterator[list[str]]:
    binary = shutil.which("tmux")
    if binary is None:
        pytest.skip("tmux is not installed (Debian package tmux)")
    base = [binary, "-L", f"falcon-gpu-top-test-{id(object())}", "-f", "/dev/null"]
    yield base
    subprocess.run([*base, "kill-server"], capture_output=True)
