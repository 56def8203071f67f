"""The real-bindings tier: nvidia-ml-py's own ctypes code against an independent NVML.

Every test here skips, with the reason, when no library is found (see ``mock.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.real_nvml import mock


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if mock.library() is not None:
        return
    skip = pytest.mark.skip(reason=mock.skip_reason())
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def nvml_lib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with ``libnvidia-ml.so.1`` for ``LD_LIBRARY_PATH``."""
    return mock.library_dir(tmp_path_factory.mktemp("nvml-lib"))
