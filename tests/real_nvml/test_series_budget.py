"""The default profile's budget on NVIDIA's NVML mock, 8 x H100, through the real bindings.

``run --once`` in each Prometheus schema and profile; per GPU the device-level series are counted:
those carrying the GPU's ``uuid`` (``UUID`` in ``dcgm``), not a pod's, process's, container's or
Slurm job's. The default profile's ``falcon_gpu`` must stay within 30 a GPU while the full profile
goes over it; the ``dcgm`` default is dcgm-exporter's default counters, ``nvidia_smi`` has one set.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.real_nvml import mock

OTHERS = ("falcon_gpu_pod_", "falcon_gpu_process_", "falcon_gpu_container_", "falcon_gpu_slurm_job_")
pytestmark = pytest.mark.skipif(not mock.is_mock(), reason="the budget is stated for the mock's H100 profile")


def _samples(lib_dir: Path, work: Path, schema: str, profile: str) -> list[dict[str, Any]]:
    config = work / f"{schema}-{profile}.toml"
    config.write_text(f'schema = "{schema}"\nnode = "n1"\n[[sinks]]\ntype = "stdout"\nformat = "json"\n')
    env = mock.environment(
        lib_dir,
        mock.write_profile(mock.load_profile("h100"), work / "h100.yaml"),
        FALCON_GPU_METRICS__PROFILE=profile,
    )
    done = mock.falcon_gpu(["run", "--once", "--config", str(config)], env)
    assert done.returncode == 0, done.stderr[-3000:]
    samples: list[dict[str, Any]] = json.loads(done.stdout)["samples"]
    return samples


def per_gpu(samples: list[dict[str, Any]]) -> Counter[str]:
    """Device-level series per GPU uuid."""
    return Counter(
        s["labels"].get("uuid") or s["labels"]["UUID"]
        for s in samples
        if (s["labels"].get("uuid") or s["labels"].get("UUID"))
        and not s["name"].startswith(OTHERS)
        and "mig_uuid" not in s["labels"]
    )


@pytest.fixture(scope="module")
def counts(
    nvml_lib_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], Counter[str]]:
    work = tmp_path_factory.mktemp("budget")
    return {
        (schema, profile): per_gpu(_samples(nvml_lib_dir, work, schema, profile))
        for schema in mock.SCHEMAS
        for profile in ("default", "full")
    }


def test_a_gpu_costs_at_most_30_falcon_gpu_series_by_default(
    counts: dict[tuple[str, str], Counter[str]],
) -> None:
    lean, full = counts[("falcon_gpu", "default")], counts[("falcon_gpu", "full")]
    assert len(lean) == len(full) == len(mock.load_profile("h100")["devices"]) == 8
    assert max(lean.values()) <= 30, lean
    assert min(full.values()) > 30, full  # what the default profile saves


def test_the_dcgm_default_is_dcgm_exporters_counters(counts: dict[tuple[str, str], Counter[str]]) -> None:
    lean, full = counts[("dcgm", "default")], counts[("dcgm", "full")]
    assert len(lean) == 8
    assert max(lean.values()) < min(full.values())
    assert max(lean.values()) <= 21 + 3  # dcgm-exporter's 21 fields at most, and the unattributed three


def test_nvidia_smi_has_one_set(counts: dict[tuple[str, str], Counter[str]]) -> None:
    assert counts[("nvidia_smi", "default")] == counts[("nvidia_smi", "full")]
