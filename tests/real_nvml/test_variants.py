"""Every command on profiles the tests write: load (``dynamic_metrics``, live processes), faults
(lost, fallen off the bus, uncorrectable ECC, each with its XID) and NVLink errors, checked in all
three schemas against the profile as written (the shared checks), plus what each variant changes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.real_nvml import checks, expect, mock

pytestmark = pytest.mark.skipif(not mock.is_mock(), reason="writes profiles for NVIDIA's NVML mock")

MIB = expect.MIB
LOAD = {
    "seed": 7,
    "utilization": {"pattern": "busy", "gpu_min": 60, "gpu_max": 92, "memory_min": 20, "memory_max": 40},
    "power": {"base_mw": 420000, "variance_mw": 15000},
    "temperature": {"base_c": 61, "variance_c": 2},
}
FAULTS = {  # GPU index -> its failure block (GPU 4 has NVLink errors, 0 and the rest are healthy)
    1: {"mode": "lost"},
    2: {"mode": "fallen_off_bus", "xid": {"code": 79}},
    3: {"mode": "ecc_uncorrectable", "xid": {"code": 48}},
}


def _node(lib_dir: Path, work: Path, profile: dict[str, Any]) -> tuple[mock.Outputs, list[expect.Gpu]]:
    path = mock.write_profile(profile, work / "profile.yaml")
    return mock.run_commands(lib_dir, path, work), expect.from_profile(profile)


@pytest.fixture(scope="module")
def loaded(
    nvml_lib_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[mock.Outputs, list[expect.Gpu]]:
    """An H100 node under load, GPU 0 running two live processes (this test's and its parent,
    so ``/proc`` has them) and GPU 1 one."""
    profile = mock.load_profile("h100")
    profile["device_defaults"]["dynamic_metrics"] = LOAD
    me, parent = os.getpid(), os.getppid()
    profile["devices"][0]["processes"] = [
        {"pid": me, "type": "C", "name": "trainer", "used_memory_mib": 20480, "sm_util": 60, "mem_util": 20},
        {"pid": parent, "type": "C", "name": "loader", "used_memory_mib": 1024, "sm_util": 5, "mem_util": 1},
    ]
    profile["devices"][1]["processes"] = [
        {"pid": me, "type": "C", "name": "trainer", "used_memory_mib": 4096}
    ]
    return _node(nvml_lib_dir, tmp_path_factory.mktemp("loaded"), profile)


@pytest.fixture(scope="module")
def faulty(
    nvml_lib_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[mock.Outputs, list[expect.Gpu]]:
    profile = mock.load_profile("b200")
    for index, failure in FAULTS.items():
        profile["devices"][index]["failure"] = failure
    profile["devices"][4]["nvlink_error"] = {"rate": 500}
    return _node(nvml_lib_dir, tmp_path_factory.mktemp("faulty"), profile)


@pytest.mark.parametrize("variant", ["loaded", "faulty"])
def test_every_command_reads_the_profile_as_written(variant: str, request: pytest.FixtureRequest) -> None:
    out, gpus = request.getfixturevalue(variant)
    checks.all_of(out, gpus)


def test_load_moves_within_the_profiles_ranges_in_every_schema(
    loaded: tuple[mock.Outputs, list[expect.Gpu]],
) -> None:
    out, gpus = loaded
    util, power, temp = LOAD["utilization"], LOAD["power"], LOAD["temperature"]
    busy_low = util["gpu_max"] - (util["gpu_max"] - util["gpu_min"]) / 4  # the mock's "busy" pattern
    for g in gpus:
        gpu = str(g.index)
        ratio = out.value("falcon_gpu", "falcon_gpu_utilization_ratio", gpu=gpu)
        assert busy_low / 100 <= ratio <= util["gpu_max"] / 100
        assert util["memory_min"] / 100 <= out.value(
            "falcon_gpu", "falcon_gpu_memory_utilization_ratio", gpu=gpu
        )
        watts = out.value("falcon_gpu", "falcon_gpu_power_watts", gpu=gpu)
        assert abs(watts - power["base_mw"] / 1000) <= power["variance_mw"] / 1000
        assert (
            abs(out.value("dcgm", "DCGM_FI_DEV_POWER_USAGE", gpu=gpu) - watts)
            <= power["variance_mw"] / 1000 * 2
        )
        celsius = out.value("falcon_gpu", "falcon_gpu_temperature_celsius", gpu=gpu)
        assert abs(celsius - temp["base_c"]) <= temp["variance_c"]
        assert abs(out.falcon("DeviceTemperature", g.index) - temp["base_c"]) <= temp["variance_c"]
        assert busy_low <= out.falcon("GPUUtils", g.index) <= util["gpu_max"]


def test_load_processes_and_their_memory(loaded: tuple[mock.Outputs, list[expect.Gpu]]) -> None:
    out, _ = loaded
    me, parent = os.getpid(), os.getppid()
    got = {
        (s["labels"]["gpu"], int(s["labels"]["pid"])): s["value"]
        for s in out.samples["falcon_gpu"]
        if s["name"] == "falcon_gpu_process_memory_used_bytes"
    }
    assert got == {("0", me): 20480 * MIB, ("0", parent): 1024 * MIB, ("1", me): 4096 * MIB}
    assert re.search(r"^OK\s+host PIDs visible\s", out.doctor, re.M), out.doctor
    assert out.returncode["doctor"] == 0, out.doctor


def test_faults_lost_gpus_xids_and_uncorrectable_ecc(faulty: tuple[mock.Outputs, list[expect.Gpu]]) -> None:
    out, _ = faulty
    for gpu in ("1", "2"):
        assert out.value("falcon_gpu", "falcon_gpu_up", gpu=gpu) == 0
        assert out.value("falcon_gpu", "falcon_gpu_health", gpu=gpu, check="lost") == 2
        assert out.falcon("GPUHealth", int(gpu)) == 2
    # each failure's XID, raised through the event set, is counted, the lost GPU's too
    for gpu, xid in (("2", 79), ("3", 48)):
        assert out.value("falcon_gpu", "falcon_gpu_xid_errors_total", gpu=gpu, xid=str(xid)) == 1
        assert out.falcon("XidErrors", int(gpu)) == 1
        assert out.falcon("XidErrors", int(gpu), out.run_falcon) == 1
    assert out.value("dcgm", "DCGM_FI_DEV_XID_ERRORS", gpu="3") == 48
    assert out.value("falcon_gpu", "falcon_gpu_health", gpu="3", check="ecc") == 2
    assert out.falcon("GPUHealth", 3) == 2
    assert re.search(r"^FAIL\s+GPU 3\s.*failing ecc .*failing xid", out.doctor, re.M), out.doctor
    (row,) = [ln for ln in out.top.splitlines() if re.match(r"3\s+NVIDIA", ln)]
    assert "ecc" in row and "xid" in row
    for gpu in ("0", "4", "5", "6", "7"):
        assert out.value("falcon_gpu", "falcon_gpu_up", gpu=gpu) == 1
        assert not out.values("falcon_gpu", "falcon_gpu_xid_errors_total", gpu=gpu)
        assert out.falcon("XidErrors", int(gpu)) == 0


def test_a_one_shot_command_whose_nvml_cannot_start_says_so_without_a_retry(tmp_path: Path) -> None:
    """Issue 20 item 5: no "retrying with backoff, next in 1s" from a process that ends now."""
    empty = tmp_path / "no-nvml"
    empty.mkdir()
    out = mock.run_commands(empty, None, tmp_path / "work")
    for key in ("run:falcon_gpu", "run:dcgm", "plugin", "top"):
        assert "NVML cannot start" in out.stderr[key], f"{key}: {out.stderr[key]}"
    for key, text in out.stderr.items():
        assert "retrying" not in text and "next in" not in text, f"{key}: {text}"
    assert re.search(r"^FAIL\s+NVML\s+NVML cannot start: ", out.doctor, re.M), out.doctor
    assert out.plugin == []
