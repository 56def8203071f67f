"""``falcon-gpu advise`` on the real bindings: MIG profiles through nvidia-ml-py's own ctypes code.

``nvmlDeviceGetGpuInstanceProfileInfo`` (pynvml's v2 struct, ``nvmlDeviceGetGpuInstanceProfileInfoV``)
is asked for every ``NVML_GPU_INSTANCE_PROFILE_*`` of each GPU. NVIDIA's mock does not model MIG and
answers NOT_SUPPORTED to every profile of its H100 (MIG mode disabled, as NVML does then): the
command must take that as "no profiles" (advice in shares and whole GPUs), say nothing about it and
exit 0. On a real library (``FALCON_GPU_TEST_NVML_LIB``) it only checks that profiles, where any are
answered, are well formed.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.real_nvml import mock


def test_advise_reads_mig_profiles_through_the_real_bindings(nvml_lib_dir: Path, tmp_path: Path) -> None:
    profile = mock.write_profile(mock.load_profile("h100"), tmp_path / "h100.yaml")
    config = tmp_path / "advise.toml"
    config.write_text(f'node = "n1"\njobs_dir = "{tmp_path / "jobs"}"\nproc_root = "{tmp_path}"\n')
    done = mock.falcon_gpu(
        ["advise", "--format", "json", "--config", str(config)], mock.environment(nvml_lib_dir, profile)
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "profile" not in done.stderr.lower(), done.stderr
    body = json.loads(done.stdout)
    assert body["workloads"] == [] and body["gpus_freed"] == 0
    if mock.is_mock():
        assert body["mig_profiles"] == {}
    for profiles in body["mig_profiles"].values():
        assert all(p["slices"] > 0 and p["memory_bytes"] > 0 and p["instances"] > 0 for p in profiles)
