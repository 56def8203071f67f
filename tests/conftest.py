"""Every test gets its own ``jobs_dir`` (through the environment, so agents started as
subprocesses inherit it): open jobs saved by one test's agent must not be restored,
closed and reported by the next one's. Likewise its own cache directory
(``XDG_CACHE_HOME``): the plugin's settings cache must not carry one test's settings
into another, nor write into the home directory of whoever runs the tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_jobs_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path_factory.mktemp("jobs")
    monkeypatch.setenv("FALCON_GPU_JOBS_DIR", str(path))
    return path


@pytest.fixture(autouse=True)
def _own_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(path))
    return path
