"""The real bindings' fast path (:mod:`falcon_gpu.sources.nvml.direct`) answers what pynvml answers.

Each test runs ``fast_calls_probe`` in a fresh interpreter on NVIDIA's mock (pynvml loads the library
once per process): the same requests asked through pynvml's own wrappers and through the kept
buffers, and whole cycles of the NVML source with the fast path on and off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pynvml
import pytest

from tests.real_nvml import mock

MANY = 40
"""Processes per GPU in the crowded profile: more than a process buffer holds at first (16)."""


LOST = 2
"""The GPU the lost profile loses (the mock then answers its memory info GPU_IS_LOST)."""


def _profile(tmp_path: Path, processes: int, *, lost: bool = False) -> Path:
    profile = mock.load_profile("h100")
    if lost:
        profile["devices"][LOST]["failure"] = {"mode": "lost"}
    profile["device_defaults"]["processes"] = [
        {"pid": 5000 + i, "name": f"job{i}", "type": "C", "used_memory_mib": 64 + i, "sm_util": (7 * i) % 101}
        for i in range(processes)
    ]
    return mock.write_profile(profile, tmp_path / f"h100-{processes}{'-lost' if lost else ''}.yaml")


def _probe(lib_dir: Path, profile: Path, *args: str) -> Any:
    env = mock.environment(lib_dir, profile)
    out = subprocess.run(
        [sys.executable, "-m", "tests.real_nvml.fast_calls_probe", *args],
        env=env, cwd=mock.REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def crowded(nvml_lib_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return _probe(nvml_lib_dir, _profile(tmp_path_factory.mktemp("crowded"), MANY), "answers")


def test_field_values_decode_as_pynvml_reads_them_per_link_scope_and_code(crowded: Any) -> None:
    for gpu in crowded["gpus"]:
        assert gpu["fields_code"] == pynvml.NVML_SUCCESS
        assert gpu["fields_fast"] == gpu["fields_pynvml"]
        assert gpu["fields_fast_again"] == gpu["fields_pynvml"]  # reset before each call, same answer
    rows = crowded["gpus"][0]["fields_fast"]
    if mock.is_mock():  # what the mock answers (README): per-link DL errors, the old totals refused
        dl_replay = [r for r in rows if r[0] == pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY]
        assert [r[1] for r in dl_replay] == list(range(18))
        assert {r[2] for r in dl_replay} == {pynvml.NVML_SUCCESS}
    codes = {r[2] for r in rows}
    assert {pynvml.NVML_SUCCESS} < codes  # SUCCESS and a refusal (the unknown ID) both decoded
    assert rows[-1][0] == 9999 and rows[-1][2] != pynvml.NVML_SUCCESS and rows[-1][4] is None
    assert len({r[3] for r in rows if r[2] == pynvml.NVML_SUCCESS}) >= 2  # several value types


def test_process_lists_and_samples_through_buffers_grown_past_their_first_size(crowded: Any) -> None:
    for gpu in crowded["gpus"]:
        assert gpu["errors"] == []
        assert gpu["compute_fast"] == gpu["compute_pynvml"]
        assert gpu["graphics_fast"] == gpu["graphics_pynvml"]
        assert gpu["samples_fast"] == gpu["samples_pynvml"]
        if mock.is_mock():
            assert [p[0] for p in gpu["compute_fast"]] == [5000 + i for i in range(MANY)]
            assert [p[1] for p in gpu["compute_fast"]] == [(64 + i) << 20 for i in range(MANY)]
            assert [s[1] for s in gpu["samples_fast"]] == [(7 * i) % 101 for i in range(MANY)]
        # pynvml raises for a list the driver refuses (the mock's MPS list): ABSENT here
        if isinstance(gpu["mps_pynvml"], str):
            assert gpu["mps_fast"] == "ABSENT"
        else:
            assert gpu["mps_fast"] == gpu["mps_pynvml"]


@pytest.mark.parametrize("processes", [3, MANY])
def test_cycles_read_the_same_with_fewer_nvml_calls(
    nvml_lib_dir: Path, tmp_path: Path, processes: int
) -> None:
    profile = _profile(tmp_path, processes)
    fast = _probe(nvml_lib_dir, profile, "cycles", "fast", "4")
    slow = _probe(nvml_lib_dir, profile, "cycles", "pynvml", "4")
    assert fast["devices"] == slow["devices"]
    assert all(fast["up"])
    ours, theirs = fast["calls_per_gpu"], slow["calls_per_gpu"]
    assert sum(ours.values()) <= sum(theirs.values())
    for name, count in ours.items():
        assert count <= theirs.get(name, 0), name
    # one call where pynvml makes a size probe and the call: a list, the samples
    assert ours["nvmlDeviceGetComputeRunningProcesses_v3"] == 1
    assert theirs["nvmlDeviceGetComputeRunningProcesses_v3"] == 2
    assert ours["nvmlDeviceGetProcessUtilization"] == 1
    assert ours["nvmlDeviceGetFieldValues"] == theirs["nvmlDeviceGetFieldValues"]


def test_memory_info_through_its_kept_struct(crowded: Any) -> None:
    for gpu in crowded["gpus"]:
        assert gpu["memory_fast"] == gpu["memory_pynvml"]
        assert isinstance(gpu["memory_fast"], list) and gpu["memory_fast"][0] > 0


@pytest.mark.skipif(not mock.is_mock(), reason="the mock's failure modes lose a GPU on purpose")
def test_a_lost_gpus_code_means_the_same_through_the_fast_path(nvml_lib_dir: Path, tmp_path: Path) -> None:
    profile = _profile(tmp_path, 3, lost=True)
    answers = _probe(nvml_lib_dir, profile, "answers")["gpus"][LOST]
    assert answers["memory_pynvml"] == f"NVMLError {pynvml.NVML_ERROR_GPU_IS_LOST}"
    assert answers["memory_fast"] == f"DeviceGone {pynvml.NVML_ERROR_GPU_IS_LOST}"
    fast = _probe(nvml_lib_dir, profile, "cycles", "fast", "3")
    slow = _probe(nvml_lib_dir, profile, "cycles", "pynvml", "3")
    assert fast["devices"] == slow["devices"]
    assert fast["up"] == [i != LOST for i in range(len(fast["up"]))]
