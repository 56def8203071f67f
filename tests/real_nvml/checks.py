"""The tier's checks of one node's outputs (:class:`~tests.real_nvml.mock.Outputs`) against what
its GPUs must read as (:mod:`tests.real_nvml.expect`), in every schema and every command.

Shared by the shipped profiles' tests and the variants': a variant changes the truth (the profile
the test wrote), never the checks. A reading the truth leaves None is not checked; a reading the
profile makes move (``dynamic_metrics``) is checked by its variant's own test.
"""

from __future__ import annotations

import re

import pytest

from tests.real_nvml import mock
from tests.real_nvml.expect import MIB, Gpu

FG, DCGM, NS = "falcon_gpu", "dcgm", "nvidia_smi"


def _approx(value: float) -> object:
    return pytest.approx(value, rel=1e-6, abs=1e-6)


def identity(out: mock.Outputs, gpus: list[Gpu]) -> None:
    """Names, UUIDs and PCI bus IDs, and which GPUs are up, in every schema."""
    assert sorted({s["labels"]["uuid"] for s in out.samples[FG] if s["name"] == "falcon_gpu_up"}) == sorted(
        g.uuid for g in gpus
    )
    for g in gpus:
        gpu = str(g.index)
        (info,) = [s for s in out.samples[FG] if s["name"] == "falcon_gpu_info" and s["labels"]["gpu"] == gpu]
        assert info["labels"]["uuid"] == g.uuid
        assert info["labels"]["model"] == g.name
        assert info["labels"]["pci_bus_id"] == g.pci_bus_id
        assert info["labels"]["node"] == mock.NODE
        assert out.value(FG, "falcon_gpu_up", gpu=gpu) == (0 if g.lost else 1)
        assert out.falcon("GPUAlive", g.index) == (0 if g.lost else 1)
        assert out.falcon("GPUAlive", g.index, out.run_falcon) == (0 if g.lost else 1)
        tags = next(
            i["tags"]
            for i in out.plugin
            if i["metric"] == "GPUAlive" and i["tags"].startswith(f"GpuId={gpu},")
        )
        assert f"uuid={g.uuid}" in tags
        assert {i["endpoint"] for i in out.plugin} == {mock.NODE}
        if not g.lost:
            labels = next(s["labels"] for s in out.samples[DCGM] if s["name"].startswith("DCGM_FI_DEV_")
                          and s["labels"].get("gpu") == gpu)  # fmt: skip
            assert (labels["UUID"], labels["modelName"], labels["Hostname"]) == (g.uuid, g.name, mock.NODE)
            assert labels["pci_bus_id"] == g.pci_bus_id


def readings(out: mock.Outputs, gpus: list[Gpu]) -> None:
    """Memory, power, energy, temperatures, clocks and utilisation, in every schema."""
    for g in gpus:
        if g.lost:
            assert not out.values(FG, "falcon_gpu_memory_total_bytes", gpu=str(g.index))
            continue
        gpu = str(g.index)
        fg = {"gpu": gpu}
        dc = {"gpu": gpu}
        if g.memory_total is not None:
            assert out.value(FG, "falcon_gpu_memory_total_bytes", **fg) == g.memory_total
            assert out.falcon("FBtotal", g.index) == g.memory_total / MIB
            assert out.falcon("FBtotal", g.index, out.run_falcon) == g.memory_total / MIB
        if g.memory_used is not None:
            assert out.value(FG, "falcon_gpu_memory_used_bytes", **fg) == g.memory_used
            assert out.value(DCGM, "DCGM_FI_DEV_FB_USED", **dc) == g.memory_used // MIB
            assert out.falcon("FBUsed", g.index) == g.memory_used / MIB
        if g.memory_free is not None:
            assert out.value(FG, "falcon_gpu_memory_free_bytes", **fg) == g.memory_free
            assert out.value(DCGM, "DCGM_FI_DEV_FB_FREE", **dc) == g.memory_free // MIB
            assert out.falcon("FBfree", g.index) == g.memory_free / MIB
        if g.memory_reserved is not None:
            assert out.value(FG, "falcon_gpu_memory_reserved_bytes", **fg) == g.memory_reserved
            assert out.value(DCGM, "DCGM_FI_DEV_FB_RESERVED", **dc) == g.memory_reserved // MIB
        if g.power_limit_watts is not None:
            assert out.value(FG, "falcon_gpu_power_limit_watts", **fg) == _approx(g.power_limit_watts)
            assert out.value(DCGM, "DCGM_FI_DEV_POWER_MGMT_LIMIT", **dc) == _approx(g.power_limit_watts)
            assert out.falcon("PowerCurrentLimit", g.index) == _approx(g.power_limit_watts)
        if g.energy_joules is not None:
            assert out.value(FG, "falcon_gpu_energy_joules_total", **fg) == _approx(g.energy_joules)
            assert out.value(DCGM, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", **dc) == _approx(
                g.energy_joules * 1000
            )
        if g.sm_clock_mhz is not None:
            assert out.value(FG, "falcon_gpu_sm_clock_hertz", **fg) == g.sm_clock_mhz * 1e6
            assert out.value(DCGM, "DCGM_FI_DEV_SM_CLOCK", **dc) == g.sm_clock_mhz
            assert out.falcon("SmClock", g.index) == g.sm_clock_mhz
        if g.memory_clock_mhz is not None:
            assert out.value(FG, "falcon_gpu_memory_clock_hertz", **fg) == g.memory_clock_mhz * 1e6
            assert out.value(DCGM, "DCGM_FI_DEV_MEM_CLOCK", **dc) == g.memory_clock_mhz
            assert out.falcon("MemClock", g.index) == g.memory_clock_mhz
        if g.memory_temperature is not None:
            assert out.value(FG, "falcon_gpu_memory_temperature_celsius", **fg) == g.memory_temperature
            assert out.value(DCGM, "DCGM_FI_DEV_MEMORY_TEMP", **dc) == g.memory_temperature
            assert out.falcon("MemTemperature", g.index) == g.memory_temperature
        if g.temperature is not None and "temperature" not in g.dynamic:
            assert out.value(FG, "falcon_gpu_temperature_celsius", **fg) == g.temperature
            assert out.value(DCGM, "DCGM_FI_DEV_GPU_TEMP", **dc) == g.temperature
            assert out.falcon("DeviceTemperature", g.index) == g.temperature
        if g.power_watts is not None and "power" not in g.dynamic:
            assert out.value(FG, "falcon_gpu_power_watts", **fg) == _approx(g.power_watts)
            assert out.value(DCGM, "DCGM_FI_DEV_POWER_USAGE", **dc) == _approx(g.power_watts)
            assert out.falcon("PowerUsed", g.index) == _approx(g.power_watts)
        if g.utilization is not None and "utilization" not in g.dynamic:
            assert out.value(FG, "falcon_gpu_utilization_ratio", **fg) == _approx(g.utilization)
            assert out.value(DCGM, "DCGM_FI_DEV_GPU_UTIL", **dc) == _approx(g.utilization * 100)
            assert out.falcon("GPUUtils", g.index) == _approx(g.utilization * 100)
            assert out.value(FG, "falcon_gpu_memory_utilization_ratio", **fg) == _approx(
                g.memory_utilization or 0
            )


def nvidia_smi(out: mock.Outputs, gpus: list[Gpu]) -> None:
    """The nvidia_smi schema: nvidia_gpu_exporter's ``uuid`` (no ``GPU-``) and identity on ``gpu_info``,
    its names and units for the readings the truth fixes."""
    for g in gpus:
        uuid = g.uuid.lower().removeprefix("gpu-")
        infos = [s["labels"] for s in out.samples[NS] if s["name"] == "nvidia_smi_gpu_info"]
        (info,) = [labels for labels in infos if labels["uuid"] == uuid]
        assert (info["name"], info["index"], info["pci_bus_id"]) == (g.name, str(g.index), g.pci_bus_id)
        if g.lost:
            assert not out.values(NS, "nvidia_smi_memory_total_bytes", uuid=uuid)
            continue
        want = {
            "memory_total_bytes": g.memory_total,
            "memory_used_bytes": g.memory_used,
            "enforced_power_limit_watts": g.power_limit_watts,
            "energy_joules_total": g.energy_joules,
            "clocks_current_sm_clock_hz": None if g.sm_clock_mhz is None else g.sm_clock_mhz * 1e6,
            "clocks_current_memory_clock_hz": None
            if g.memory_clock_mhz is None
            else g.memory_clock_mhz * 1e6,
            "temperature_memory": g.memory_temperature,
            "temperature_gpu": None if "temperature" in g.dynamic else g.temperature,
            "power_draw_watts": None if "power" in g.dynamic else g.power_watts,
            "utilization_gpu_ratio": None if "utilization" in g.dynamic else g.utilization,
        }
        for name, value in want.items():
            if value is not None:
                assert out.value(NS, "nvidia_smi_" + name, uuid=uuid) == _approx(value), name


def ecc(out: mock.Outputs, gpus: list[Gpu]) -> None:
    """ECC totals, volatile and aggregate, in every schema."""
    for g in gpus:
        if g.lost or g.ecc_volatile is None or g.ecc_aggregate is None:
            continue
        gpu = str(g.index)
        got = {
            (scope, kind): out.value(FG, "falcon_gpu_ecc_errors_total", gpu=gpu, type=kind, scope=scope)
            for scope in ("volatile", "aggregate")
            for kind in ("corrected", "uncorrected")
        }
        dcgm = {
            ("volatile", "corrected"): out.value(DCGM, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", gpu=gpu),
            ("volatile", "uncorrected"): out.value(DCGM, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", gpu=gpu),
            ("aggregate", "corrected"): out.value(DCGM, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", gpu=gpu),
            ("aggregate", "uncorrected"): out.value(DCGM, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", gpu=gpu),
        }
        if g.ecc_uncorrectable:  # the mock counts up with each call from the trip, in each process
            assert got[("volatile", "uncorrected")] > 0 and dcgm[("volatile", "uncorrected")] > 0
            assert got[("aggregate", "uncorrected")] >= got[("volatile", "uncorrected")]
            assert out.falcon("DoubleBitError", g.index) > 0
            continue
        assert dcgm == got
        assert out.falcon("SingleBitError", g.index) == got[("volatile", "corrected")]
        assert out.falcon("DoubleBitError", g.index) == got[("volatile", "uncorrected")]
        assert (got[("volatile", "corrected")], got[("volatile", "uncorrected")]) == g.ecc_volatile
        assert (got[("aggregate", "corrected")], got[("aggregate", "uncorrected")]) == g.ecc_aggregate


def processes(out: mock.Outputs, gpus: list[Gpu]) -> None:
    """Each GPU's process list and memory (the per-process series, and top's rows)."""
    for g in gpus:
        if g.lost or g.processes is None:
            continue
        got = {
            (int(s["labels"]["pid"]), s["value"])
            for s in out.samples[FG]
            if s["name"] == "falcon_gpu_process_memory_used_bytes" and s["labels"]["gpu"] == str(g.index)
        }
        assert got == set(g.processes)
        for pid, _ in g.processes:
            assert re.search(rf"^\s+pid {pid}\b", out.top, re.M), out.top


def doctor(out: mock.Outputs, gpus: list[Gpu]) -> None:
    """``doctor`` prints a table (a row per GPU, with its identity and health), no log."""
    assert out.stderr["doctor"] == ""
    rows = {m[1]: m[0] for m in re.findall(r"^(OK|WARN|FAIL|SKIP)\s+(GPU \d+)\s", out.doctor, re.M)}
    assert sorted(rows) == sorted(f"GPU {g.index}" for g in gpus), out.doctor
    assert re.search(rf"^OK\s+NVML\s.*{len(gpus)} GPU\(s\)$", out.doctor, re.M), out.doctor
    for g in gpus:
        (line,) = [ln for ln in out.doctor.splitlines() if re.match(rf"(OK|WARN|FAIL)\s+GPU {g.index}\s", ln)]
        assert f"{g.name} {g.uuid}" in line
        if g.lost:
            assert rows[f"GPU {g.index}"] == "FAIL" and "fell off the bus" in line


def top(out: mock.Outputs, gpus: list[Gpu]) -> None:
    """``top --once``: a row per GPU with its model, and LOST for a lost one."""
    assert out.returncode["top"] == 0
    for g in gpus:
        (row,) = [ln for ln in out.top.splitlines() if re.match(rf"{g.index}\s+{re.escape(g.name)}\s", ln)]
        if g.lost:
            assert "LOST" in row
            continue
        if g.memory_total is not None:
            assert f"/{g.memory_total / 2**30:.1f} GiB" in row
        if g.power_limit_watts is not None:
            assert f"/{g.power_limit_watts:.0f} W" in row


def no_traceback(out: mock.Outputs) -> None:
    for key, text in out.stderr.items():
        assert "Traceback" not in text, f"{key}:\n{text}"
    assert out.returncode["run:falcon_gpu"] == out.returncode["run:dcgm"] == 0
    assert out.returncode["plugin"] == 0


def quiet(out: mock.Outputs, gpus: list[Gpu]) -> None:
    """Issue 20 item 5: at most one INFO line per GPU model about what it lacks, none per GPU;
    ``plugin`` and ``top`` log no INFO at all, ``doctor`` nothing."""
    models = {g.name for g in gpus}
    for key, text in out.stderr.items():
        info = [ln for ln in text.splitlines() if " INFO " in ln]
        assert not [ln for ln in info if "is not supported on GPU-" in ln], f"{key}:\n{text}"
        lacks = [ln for ln in info if "does not support" in ln]
        assert len(lacks) <= len(models), f"{key}:\n{text}"
        assert len(info) <= 2 * len(models), f"{key}:\n{text}"  # nothing else said per GPU either
        if key in ("plugin", "top", "doctor"):
            assert not info, f"{key}:\n{text}"


def all_of(out: mock.Outputs, gpus: list[Gpu]) -> None:
    no_traceback(out)
    identity(out, gpus)
    readings(out, gpus)
    nvidia_smi(out, gpus)
    ecc(out, gpus)
    processes(out, gpus)
    doctor(out, gpus)
    top(out, gpus)
    quiet(out, gpus)
