"""The tier itself: pynvml loads the independent library and counts the profile's GPUs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.real_nvml import mock


def test_pynvml_counts_the_profiles_gpus(nvml_lib_dir: Path, tmp_path: Path) -> None:
    profile = mock.load_profile("h100")
    path = mock.write_profile(profile, tmp_path / "h100.yaml")
    env = mock.environment(nvml_lib_dir, path)
    probe = (
        "import json, pynvml as n; n.nvmlInit(); c = n.nvmlDeviceGetCount();"
        "h = n.nvmlDeviceGetHandleByIndex(0);"
        "print(json.dumps({'count': c, 'name': n.nvmlDeviceGetName(h)}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    answer = json.loads(out.stdout)
    if mock.is_mock():
        assert answer["count"] == len(profile["devices"])
        assert answer["name"] == profile["device_defaults"]["name"]
    else:
        assert answer["count"] >= 1
