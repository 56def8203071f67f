"""What the simulator knows per GPU model that a scenario does not say: its MIG profiles.

Each model's GPU instance profiles as ``nvidia-smi mig -lgip`` lists them on that model (NVIDIA's
MIG user guide), keyed by NVML's profile index (``NVML_GPU_INSTANCE_PROFILE_*``). A scenario GPU
gets the first model whose key is in its ``name`` (``"NVIDIA H100 80GB HBM3"`` -> ``H100 80GB``);
a model not listed has no MIG (every profile NOT_SUPPORTED), as a T4 or an L40S.
"""

from __future__ import annotations

import msgspec
import pynvml

P = pynvml


class SimProfile(msgspec.Struct, frozen=True, gc=False):
    name: str
    slices: int
    instances: int
    multiprocessors: int
    memory_mib: int


def _p(name: str, slices: int, instances: int, sms: int, mib: int) -> SimProfile:
    return SimProfile(name, slices, instances, sms, mib)


_A100_80GB: dict[int, SimProfile] = {
    P.NVML_GPU_INSTANCE_PROFILE_1_SLICE: _p("MIG 1g.10gb", 1, 7, 14, 9728),
    P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2: _p("MIG 1g.20gb", 1, 4, 14, 19968),
    P.NVML_GPU_INSTANCE_PROFILE_2_SLICE: _p("MIG 2g.20gb", 2, 3, 28, 19968),
    P.NVML_GPU_INSTANCE_PROFILE_3_SLICE: _p("MIG 3g.40gb", 3, 2, 42, 40192),
    P.NVML_GPU_INSTANCE_PROFILE_4_SLICE: _p("MIG 4g.40gb", 4, 1, 56, 40192),
    P.NVML_GPU_INSTANCE_PROFILE_7_SLICE: _p("MIG 7g.80gb", 7, 1, 98, 80384),
}

MIG_PROFILES: dict[str, dict[int, SimProfile]] = {
    "H100 80GB": {
        P.NVML_GPU_INSTANCE_PROFILE_1_SLICE: _p("MIG 1g.10gb", 1, 7, 16, 9984),
        P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1: _p("MIG 1g.10gb+me", 1, 1, 16, 9984),
        P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2: _p("MIG 1g.20gb", 1, 4, 26, 20096),
        P.NVML_GPU_INSTANCE_PROFILE_2_SLICE: _p("MIG 2g.20gb", 2, 3, 32, 20096),
        P.NVML_GPU_INSTANCE_PROFILE_3_SLICE: _p("MIG 3g.40gb", 3, 2, 60, 40448),
        P.NVML_GPU_INSTANCE_PROFILE_4_SLICE: _p("MIG 4g.40gb", 4, 1, 64, 40448),
        P.NVML_GPU_INSTANCE_PROFILE_7_SLICE: _p("MIG 7g.80gb", 7, 1, 132, 81152),
    },
    "H200": {
        P.NVML_GPU_INSTANCE_PROFILE_1_SLICE: _p("MIG 1g.18gb", 1, 7, 16, 16384),
        P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2: _p("MIG 1g.35gb", 1, 4, 26, 32768),
        P.NVML_GPU_INSTANCE_PROFILE_2_SLICE: _p("MIG 2g.35gb", 2, 3, 32, 32768),
        P.NVML_GPU_INSTANCE_PROFILE_3_SLICE: _p("MIG 3g.71gb", 3, 2, 60, 71680),
        P.NVML_GPU_INSTANCE_PROFILE_4_SLICE: _p("MIG 4g.71gb", 4, 1, 64, 71680),
        P.NVML_GPU_INSTANCE_PROFILE_7_SLICE: _p("MIG 7g.141gb", 7, 1, 132, 143360),
    },
    "A100-SXM4-80GB": _A100_80GB,
    "A100 80GB": _A100_80GB,  # the PCIe board
    "A100": {  # the 40 GB boards (A100-SXM4-40GB, A100-PCIE-40GB): after the 80 GB names
        P.NVML_GPU_INSTANCE_PROFILE_1_SLICE: _p("MIG 1g.5gb", 1, 7, 14, 4864),
        P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2: _p("MIG 1g.10gb", 1, 4, 14, 9856),
        P.NVML_GPU_INSTANCE_PROFILE_2_SLICE: _p("MIG 2g.10gb", 2, 3, 28, 9856),
        P.NVML_GPU_INSTANCE_PROFILE_3_SLICE: _p("MIG 3g.20gb", 3, 2, 42, 19968),
        P.NVML_GPU_INSTANCE_PROFILE_4_SLICE: _p("MIG 4g.20gb", 4, 1, 56, 19968),
        P.NVML_GPU_INSTANCE_PROFILE_7_SLICE: _p("MIG 7g.40gb", 7, 1, 98, 40192),
    },
}


def mig_profiles(model: str) -> dict[int, SimProfile]:
    """The profiles of the first listed model whose key is part of ``model``; {} for none."""
    return next((table for key, table in MIG_PROFILES.items() if key in model), {})
