"""The nvidia_smi schema keeps nvidia_gpu_exporter's names, units and labels (``uuid`` without
``GPU-``, identity on ``nvidia_smi_gpu_info``), the pod of a GPU's one owner on its identity series."""

from __future__ import annotations

from msgspec.structs import replace

from falcon_gpu.model.samples import PromBatch
from falcon_gpu.readings.device import READINGS
from falcon_gpu.schemas import nvidia_smi
from falcon_gpu.schemas.render import RenderedCycle
from falcon_gpu.settings import Settings
from tests.schemas.fixtures import GIB, INFER, TRAIN, cycle

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def series_of(b: PromBatch) -> Series:
    return {(f.name, frozenset(s.labels)): s.value for f in b.families for s in f.series}


def one(vals: Series, name: str, **labels: str) -> tuple[dict[str, str], float]:
    found = [(dict(lb), v) for (n, lb), v in vals.items() if n == name and set(labels.items()) <= lb]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def test_upstream_names_and_units_from_the_reading_table() -> None:
    vals = series_of(nvidia_smi.render(cycle()))
    uuid = {"uuid": "aaaa"}  # GPU-aaaa, as nvidia_gpu_exporter writes it: lower case, no "gpu-"
    assert one(vals, "nvidia_smi_utilization_gpu_ratio", **uuid)[1] == 0.73  # [%] -> ratio
    assert one(vals, "nvidia_smi_memory_used_bytes", **uuid)[1] == 20 * GIB  # [MiB] -> bytes
    assert one(vals, "nvidia_smi_clocks_current_sm_clock_hz", **uuid)[1] == 1980e6  # [MHz] -> Hz
    assert one(vals, "nvidia_smi_power_draw_watts", **uuid)[1] == 350.5
    assert one(vals, "nvidia_smi_enforced_power_limit_watts", **uuid)[1] == 700
    assert one(vals, "nvidia_smi_temperature_gpu", **uuid)[1] == 61  # no unit: degrees C
    assert one(vals, "nvidia_smi_pstate", **uuid)[1] == 0
    assert one(vals, "nvidia_smi_fan_speed_ratio", **uuid)[1] == 0.3
    assert one(vals, "nvidia_smi_energy_joules_total", **uuid)[1] == 1350.5
    assert one(vals, "nvidia_smi_index", **uuid)[1] == 0
    published = {p.name for r in READINGS if (p := r.nvidia_smi) is not None}
    assert published <= {s.name for s in nvidia_smi.SPECS}
    assert all(name.startswith("nvidia_smi_") for name in published)


def test_readings_carry_uuid_alone_gpu_info_the_identity_and_the_one_owner() -> None:
    vals = series_of(nvidia_smi.render(cycle()))
    assert one(vals, "nvidia_smi_temperature_gpu", uuid="aaaa")[0] == {"uuid": "aaaa"}
    info, value = one(vals, "nvidia_smi_gpu_info", uuid="aaaa")
    assert value == 1
    assert (info["namespace"], info["pod"], info["container"]) == (
        TRAIN.namespace,
        TRAIN.pod,
        TRAIN.container,
    )
    assert {k: info[k] for k in ("name", "index", "driver_version", "cuda_version", "pci_bus_id")} == {
        "name": "NVIDIA H100 80GB HBM3",
        "index": "0",
        "driver_version": "550.54.15",
        "cuda_version": "12.4",
        "pci_bus_id": "00000000:18:00.0",
    }
    # throttle reasons as 0/1 per nvidia-smi field, and NVML's bitmask (sw_power_cap: bit 2)
    assert one(vals, "nvidia_smi_clocks_event_reasons_sw_power_cap", uuid="aaaa")[1] == 1
    assert one(vals, "nvidia_smi_clocks_event_reasons_hw_slowdown", uuid="aaaa")[1] == 0
    assert one(vals, "nvidia_smi_clocks_event_reasons_active", uuid="aaaa")[1] == 4
    assert one(vals, "nvidia_smi_ecc_errors_uncorrected_aggregate_total", uuid="aaaa")[1] == 1
    assert one(vals, "nvidia_smi_xid_errors_total", uuid="aaaa", xid="79")[1] == 1


def test_a_gpu_shared_by_two_containers_carries_no_pod() -> None:
    c = cycle()
    first = c.attribution.pods[0]
    shared = replace(c.attribution, pods=(*c.attribution.pods, replace(first, container=INFER)))
    vals = series_of(nvidia_smi.render(replace(c, attribution=shared)))
    assert "pod" not in one(vals, "nvidia_smi_gpu_info", uuid="aaaa")[0]


def test_mig_board_has_no_pod_its_mig_devices_do() -> None:
    vals = series_of(nvidia_smi.render(cycle()))
    assert one(vals, "nvidia_smi_mig_mode_current", uuid="bbbb") == ({"uuid": "bbbb"}, 1)
    assert "pod" not in one(vals, "nvidia_smi_gpu_info", uuid="bbbb")[0]
    labels, used = one(vals, "nvidia_smi_mig_memory_used_bytes", uuid="bbbb", gpu_instance_id="1")
    assert (labels, used) == ({"uuid": "bbbb", "gpu_instance_id": "1"}, GIB)
    info, _ = one(vals, "nvidia_smi_mig_info", uuid="bbbb")
    assert (info["mig_uuid"], info["profile"], info["compute_instance_id"]) == ("MIG-1111", "1g.5gb", "0")
    assert info["pod"] == INFER.pod
    assert one(vals, "nvidia_smi_mig_tensor_activity_ratio", uuid="bbbb")[1] == 0.25
    # the lost GPU: its identity stays, its readings go
    assert one(vals, "nvidia_smi_gpu_info", uuid="cccc")[1] == 1
    assert not [k for k in vals if k[0] == "nvidia_smi_temperature_gpu" and ("uuid", "cccc") in k[1]]


def test_processes_only_with_process_metrics() -> None:
    assert not [k for k in series_of(nvidia_smi.render(cycle())) if k[0] == "nvidia_smi_compute_apps"]
    vals = series_of(nvidia_smi.render(cycle(process_metrics=True)))
    assert one(vals, "nvidia_smi_compute_apps", uuid="aaaa")[1] == 1
    labels, used = one(vals, "nvidia_smi_compute_app_used_memory_bytes", uuid="aaaa")
    assert (labels["pid"], labels["process_name"], used) == ("4242", "python", 20 * GIB)


def test_the_schema_setting_selects_it() -> None:
    assert Settings(schema="nvidia_smi").schema_ == "nvidia_smi"
    batch = RenderedCycle(cycle(), "nvidia_smi").prometheus
    assert any(f.name == "nvidia_smi_gpu_info" for f in batch.families)
