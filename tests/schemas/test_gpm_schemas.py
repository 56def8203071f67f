"""GPM, PCIe and NVLink readings through every schema: values in = values out, in each schema's units,
per MIG GPU instance where the schema reports instances; pre-Hopper GPUs emit none of these series."""

from __future__ import annotations

import pytest

from falcon_gpu.model.samples import PromBatch
from falcon_gpu.schemas import dcgm, falcon_gpu, openfalcon
from tests.schemas.fixtures import GPM, INSTANCE_GPM, MIB_S, cycle
from tests.schemas.test_pod_invariants import pick, render_cycles, series

GPM_NAMES = (
    ("sm_active", "SM_ACTIVE"), ("sm_occupancy", "SM_OCCUPANCY"), ("tensor_active", "PIPE_TENSOR_ACTIVE"),
    ("dram_active", "DRAM_ACTIVE"), ("graphics_active", "GR_ENGINE_ACTIVE"),
    ("fp64_active", "PIPE_FP64_ACTIVE"), ("fp32_active", "PIPE_FP32_ACTIVE"),
    ("fp16_active", "PIPE_FP16_ACTIVE"),
)  # fmt: skip
"""(GpmReading field, dcgm-exporter's name after DCGM_FI_PROF_), written here apart from the schema."""


def values(batch: PromBatch, name: str, **want: str) -> list[float]:
    return [v for _, v in pick(series(batch), name, **want)]


def test_falcon_gpu_schema_has_gpm_ratios_per_gpu_and_instance_and_the_counters() -> None:
    batch = falcon_gpu.render(cycle())
    for attr, _ in GPM_NAMES:
        name = f"falcon_gpu_{attr}_ratio"
        assert values(batch, name, uuid="GPU-aaaa", mig_uuid="") == [getattr(GPM, attr)], name
        want = getattr(INSTANCE_GPM, attr)
        assert values(batch, name, mig_uuid="MIG-1111") == ([] if want is None else [want]), name
    assert values(batch, "falcon_gpu_pcie_transmit_bytes_total", uuid="GPU-aaaa") == [4e9]
    assert values(batch, "falcon_gpu_pcie_receive_bytes_total", uuid="GPU-aaaa") == [9e9]
    assert values(batch, "falcon_gpu_nvlink_transmit_bytes_total", uuid="GPU-aaaa") == [2e10]
    assert values(batch, "falcon_gpu_nvlink_receive_bytes_total", uuid="GPU-aaaa") == [1e10]
    errors = {(lb["link"], lb["type"]): v for lb, v in pick(series(batch), "falcon_gpu_nvlink_errors_total")}
    assert errors == {("2", "crc_flit"): 3, ("2", "crc_data"): 0, ("2", "replay"): 2, ("2", "recovery"): 0}
    kinds = {f.name: f.kind for f in batch.families}
    assert (
        kinds["falcon_gpu_pcie_transmit_bytes_total"] == kinds["falcon_gpu_nvlink_errors_total"] == "counter"
    )
    assert kinds["falcon_gpu_sm_active_ratio"] == "gauge"


def test_dcgm_schema_has_dcgm_exporters_names_and_units() -> None:
    batch = dcgm.render(cycle())
    for attr, name in GPM_NAMES:
        assert values(batch, f"DCGM_FI_PROF_{name}", UUID="GPU-aaaa") == [getattr(GPM, attr)], (
            name
        )  # ratio 0-1
    # the MIG GPU: per GPU instance, with GPU_I_* and the instance's pod; no whole-GPU GPM series
    assert values(batch, "DCGM_FI_PROF_SM_ACTIVE", UUID="GPU-bbbb", GPU_I_ID="1", GPU_I_PROFILE="1g.5gb",
                  pod="infer-7") == [0.8]  # fmt: skip
    assert values(batch, "DCGM_FI_PROF_SM_ACTIVE", UUID="GPU-bbbb", GPU_I_ID="") == []
    assert values(batch, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", UUID="GPU-bbbb") == []  # the instance has none
    assert values(batch, "DCGM_FI_PROF_PCIE_TX_BYTES", UUID="GPU-aaaa") == [3 * MIB_S]  # bytes per second
    assert values(batch, "DCGM_FI_PROF_PCIE_RX_BYTES", UUID="GPU-aaaa") == [5 * MIB_S]
    assert values(batch, "DCGM_FI_PROF_NVLINK_TX_BYTES", UUID="GPU-aaaa") == [7 * MIB_S]
    assert values(batch, "DCGM_FI_PROF_NVLINK_RX_BYTES", UUID="GPU-aaaa") == [11 * MIB_S]
    assert values(batch, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", UUID="GPU-aaaa") == [3e10]  # TX + RX bytes
    assert values(batch, "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", UUID="GPU-aaaa") == [3]
    assert values(batch, "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", UUID="GPU-aaaa") == [2]
    assert values(batch, "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", UUID="GPU-aaaa") == [0]
    kinds = {f.name: f.kind for f in batch.families}
    assert kinds["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"] == "counter"
    assert kinds["DCGM_FI_PROF_PCIE_TX_BYTES"] == kinds["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] == "gauge"


def test_openfalcon_schema_has_gpu_mons_names_in_percent_and_mb_per_second() -> None:
    items = {(i.metric, i.tags.split(",")[0]): i.value for i in openfalcon.render(cycle())}
    assert items[("SmActive", "GpuId=0")] == pytest.approx(63)
    assert items[("SmOccupancy", "GpuId=0")] == pytest.approx(41)
    assert items[("TensorActive", "GpuId=0")] == pytest.approx(22)
    assert items[("DramActive", "GpuId=0")] == pytest.approx(35)
    assert (items[("Tx", "GpuId=0")], items[("Rx", "GpuId=0")]) == (3, 5)  # MB/s
    assert (items[("NvlinkTx", "GpuId=0")], items[("NvlinkRx", "GpuId=0")]) == (7, 11)
    assert ("SmActive", "GpuId=1") not in items  # the MIG A100 reports no whole-GPU GPM


@pytest.mark.parametrize("schema", ["falcon_gpu", "dcgm"])
def test_pre_hopper_gpus_of_the_bundled_node_emit_none_of_the_gpm_series(schema: str) -> None:
    """mixed-4gpu: two H100s answer GPM, the A100 and the L4 do not (the L4 has no NVLink either)."""
    run = render_cycles("default", schema=schema, cycles=2)
    uuid_label = "uuid" if schema == "falcon_gpu" else "UUID"
    gpm_names = [f"falcon_gpu_{a}_ratio" for a, _ in GPM_NAMES] if schema == "falcon_gpu" else [
        f"DCGM_FI_PROF_{n}" for _, n in GPM_NAMES
    ]  # fmt: skip
    first, second = run.cycles
    for name in gpm_names:
        assert pick(first, name) == [], f"{name}: none on the first cycle (one GPM sample only)"
        assert {lb[uuid_label] for lb, _ in pick(second, name)} == {
            "GPU-33ad4386-5f6c-caaa-cfa1-cc0f73ed9037", "GPU-b9e2d5dc-d253-532a-793c-58ab5eff27c8",
        }, name  # fmt: skip
