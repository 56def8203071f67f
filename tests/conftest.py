"""Every test gets its own ``jobs_dir`` (through the environment, so agents started as
subprocesses inherit it): open jobs saved by one test's agent must not be restored,
closed and reported by the next one's."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_jobs_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path_factory.mktemp("jobs")
    monkeypatch.setenv("FALCON_GPU_JOBS_DIR", str(path))
    return path
