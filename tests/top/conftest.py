"""tmux for the live view's tests: one server per test, on its own socket."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture
def tmux() -> Iterator[list[str]]:
    binary = shutil.which("tmux")
    if binary is None:
        pytest.skip("tmux is not installed (Debian package tmux)")
    # a name never used before: id() of a fresh object repeats, and a new server on the socket of one
    # still exiting after kill-server dies at once ("server exited unexpectedly")
    base = [binary, "-L", f"falcon-gpu-top-test-{uuid.uuid4().hex}", "-f", "/dev/null"]
    yield base
    subprocess.run([*base, "kill-server"], capture_output=True)
