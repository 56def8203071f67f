"""The dcgm schema keeps dcgm-exporter's names, labels and units."""

from __future__ import annotations

from falcon_gpu.schemas import dcgm
from tests.schemas.fixtures import cycle


def test_dcgm_names_units_and_owner_labels() -> None:
    b = dcgm.render(cycle())
    vals = {(f.name, frozenset(s.labels)): s.value for f in b.families for s in f.series}

    def one(name: str, **labels: str) -> float:
        hits = [v for (n, lb), v in vals.items() if n == name and set(labels.items()) <= lb]
        assert len(hits) == 1, (name, labels, hits)
        return hits[0]

    assert (
        one(
            "DCGM_FI_DEV_GPU_UTIL",
            UUID="GPU-aaaa",
            gpu="0",
            device="nvidia0",
            Hostname="node-a",
            modelName="NVIDIA H100 80GB HBM3",
            pod="train-0",
            namespace="ml",
            container="main",
        )
        == 73
    )
    assert one("DCGM_FI_DEV_FB_USED", UUID="GPU-aaaa") == 20 * 1024
    assert one("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", UUID="GPU-aaaa") == 1350500
    assert one("DCGM_FI_DEV_SM_CLOCK", UUID="GPU-aaaa") == 1980
    assert one("DCGM_FI_DEV_XID_ERRORS", UUID="GPU-aaaa") == 79
    assert one("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", UUID="GPU-aaaa") == 4  # sw_power_cap bit
    assert one("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", UUID="GPU-aaaa") == 1
    kinds = {f.name: f.kind for f in b.families}
    assert kinds["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "counter"
    assert kinds["DCGM_FI_DEV_GPU_UTIL"] == "gauge"
    assert "falcon_gpu_pod_memory_used_bytes" in kinds  # per-pod numbers kept
