"""Every command on every shipped profile of the mock, checked value by value against the profile
YAML this test parsed itself, in all three schemas (falcon_gpu, dcgm, Open-Falcon).

One node's commands run once (side by side, :func:`~tests.real_nvml.mock.run_commands`) and every
check reads their output; on a real driver (``FALCON_GPU_TEST_NVML_LIB``) the one node is the
machine's and the truth is pynvml's own answer (:func:`~tests.real_nvml.expect.from_driver`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.real_nvml import checks, expect, mock

NODES = mock.PROFILE_NAMES if mock.is_mock() else ("driver",)


@pytest.fixture(scope="module", params=NODES)
def node(
    request: pytest.FixtureRequest, nvml_lib_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[mock.Outputs, list[expect.Gpu]]:
    name: str = request.param
    work = tmp_path_factory.mktemp(f"node-{name}")
    if not mock.is_mock():
        return mock.run_commands(nvml_lib_dir, None, work), expect.from_driver(nvml_lib_dir)
    profile = mock.load_profile(name)
    path = mock.write_profile(profile, work / f"{name}.yaml")
    return mock.run_commands(nvml_lib_dir, path, work), expect.from_profile(profile)


CHECKS: dict[str, Callable[[mock.Outputs, list[expect.Gpu]], None]] = {
    "identity": checks.identity,
    "readings": checks.readings,
    "nvidia_smi": checks.nvidia_smi,
    "ecc": checks.ecc,
    "processes": checks.processes,
    "doctor": checks.doctor,
    "top": checks.top,
    "quiet": checks.quiet,
}


def test_no_traceback_and_exit_codes(node: tuple[mock.Outputs, list[expect.Gpu]]) -> None:
    checks.no_traceback(node[0])


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_values_match_the_profile(node: tuple[mock.Outputs, list[expect.Gpu]], check: str) -> None:
    out, gpus = node
    CHECKS[check](out, gpus)
