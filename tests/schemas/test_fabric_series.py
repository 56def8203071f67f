"""The fabric's dcgm status follows DCGM's mapping of NVML's registration state (DcgmCacheManager's
GetFMStatusFromStruct): the state as it is, except completed with an error status, which is Failure (4)."""

from __future__ import annotations

import pytest

from falcon_gpu.model.fabric import FabricReading
from falcon_gpu.schemas.fabric import dcgm_status


@pytest.mark.parametrize(
    ("state", "status", "dcgm"),
    [(1, 0, 1), (2, 0, 2), (3, 0, 3), (3, 15, 4), (2, 15, 2)],  # 15: NVML_ERROR_TIMEOUT
)
def test_dcgm_fabric_manager_status(state: int, status: int, dcgm: int) -> None:
    assert dcgm_status(FabricReading(state, status, 0, "00000000-0000-0000-0000-000000000000", 0x1AA)) == dcgm
