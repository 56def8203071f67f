"""Issue 20 item 1: an XID that a GPU raises while a one-shot command reads the GPUs is counted.

The mock raises a failure's XID through the event set once the GPU has answered ``after_calls``
guarded calls; 12 trips GPU 0 among its readings (after its ECC counters were read: they still say
0 in the same cycle), after the event set was built and drained. Before the fix, ``run --once``,
``plugin``, ``doctor`` and ``top --once`` drained the set only before the readings and never saw it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.real_nvml import mock

pytestmark = pytest.mark.skipif(
    not mock.is_mock(), reason="raises an XID through the mock's failure injection"
)

XID = 48
AFTER_CALLS = 12


@pytest.fixture(scope="module")
def raised(nvml_lib_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> mock.Outputs:
    work = tmp_path_factory.mktemp("xid-mid-cycle")
    profile = mock.load_profile("h100")
    profile["devices"][0]["failure"] = {
        "mode": "ecc_uncorrectable",
        "after_calls": AFTER_CALLS,
        "xid": {"code": XID},
    }
    return mock.run_commands(nvml_lib_dir, mock.write_profile(profile, work / "h100.yaml"), work)


def test_run_once_counts_it_in_both_prometheus_schemas(raised: mock.Outputs) -> None:
    assert raised.value("falcon_gpu", "falcon_gpu_xid_errors_total", gpu="0", xid=str(XID)) == 1
    assert raised.value("dcgm", "DCGM_FI_DEV_XID_ERRORS", gpu="0") == XID  # dcgm-exporter: the last XID
    assert raised.value("falcon_gpu", "falcon_gpu_health", gpu="0", check="xid") > 0
    assert raised.falcon("XidErrors", 0, raised.run_falcon) == 1
    assert not raised.values("falcon_gpu", "falcon_gpu_xid_errors_total", gpu="1")


def test_the_plugin_counts_it(raised: mock.Outputs) -> None:
    assert raised.falcon("XidErrors", 0) == 1
    assert raised.falcon("XidErrors", 1) == 0


def test_doctor_and_top_show_it(raised: mock.Outputs) -> None:
    assert re.search(r"^FAIL\s+GPU 0\s.*failing xid", raised.doctor, re.M), raised.doctor
    (row,) = [ln for ln in raised.top.splitlines() if re.match(r"0\s+NVIDIA", ln)]
    assert "xid" in row.split("FAIL:")[-1], raised.top
