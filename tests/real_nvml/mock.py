"""The real-bindings tier's way to NVIDIA's C-ABI NVML mock (or a real library).

nvidia-ml-py loads ``CDLL("libnvidia-ml.so.1")``. In a checkout the mock's
``libnvidia-ml.so.1`` may arrive as a text file naming its target (a symlink that
the copy did not keep), so the tier never points ``LD_LIBRARY_PATH`` at the mock's
folder: it makes a folder of its own with a real symlink to the library.

Which library: ``FALCON_GPU_TEST_NVML_LIB`` (a path to a ``libnvidia-ml.so*``; with a
real driver's library no ``MOCK_NVML_CONFIG`` is needed), else
``../shared/mocknvml/libnvidia-ml.so.1`` beside the repository. Neither: the tier
skips, saying so (a user's clone has no ``../shared``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
MOCK_DIR = REPO.parent / "shared" / "mocknvml"
PROFILES = MOCK_DIR / "configs"
PROFILE_NAMES = ("a100", "h100", "b200", "gb200", "gb300", "l40s", "t4")


def library() -> Path | None:
    """The NVML library the tier loads, resolved to a real file, or None."""
    named = os.environ.get("FALCON_GPU_TEST_NVML_LIB")
    candidate = Path(named) if named else MOCK_DIR / "libnvidia-ml.so.1"
    if not candidate.exists():
        return None
    target = candidate.resolve()
    if target.stat().st_size < 1024:
        # a symlink stored as a text file holding the target's name
        target = candidate.parent / target.read_text().strip()
    return target if target.is_file() else None


def is_mock() -> bool:
    return not os.environ.get("FALCON_GPU_TEST_NVML_LIB")


def skip_reason() -> str:
    return (
        "no NVML library for the real-bindings tier: set FALCON_GPU_TEST_NVML_LIB, "
        f"or provide {MOCK_DIR}/libnvidia-ml.so.1"
    )


def library_dir(where: Path) -> Path:
    """A folder holding ``libnvidia-ml.so.1`` as a real symlink to the library."""
    lib = library()
    assert lib is not None, skip_reason()
    where.mkdir(parents=True, exist_ok=True)
    link = where / "libnvidia-ml.so.1"
    if not link.exists():
        link.symlink_to(lib)
    return where


def load_profile(name: str) -> dict[str, Any]:
    """A shipped mock profile (``h100``, ...) as the test's own parse of its YAML."""
    with (PROFILES / f"mock-nvml-config-{name}.yaml").open() as f:
        data: dict[str, Any] = yaml.safe_load(f)
    return data


def write_profile(profile: dict[str, Any], path: Path) -> Path:
    """Write a (changed) profile for the mock; every string quoted, as its README asks."""

    class Quoted(yaml.SafeDumper):
        pass

    Quoted.add_representer(
        str, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    )
    path.write_text(yaml.dump(profile, Dumper=Quoted, sort_keys=False))
    return path


def environment(lib_dir: Path, profile_path: Path | None, **extra: str) -> dict[str, str]:
    """The environment of a falcon-gpu command on the real bindings."""
    kept = ("FALCON_GPU_JOBS_DIR",)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FALCON_GPU_") or k in kept}
    env["LD_LIBRARY_PATH"] = str(lib_dir)
    if profile_path is not None and is_mock():
        env["MOCK_NVML_CONFIG"] = str(profile_path)
    env.update(extra)
    return env


def falcon_gpu(
    args: list[str], env: dict[str, str], timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``falcon-gpu ARGS`` in a fresh interpreter (pynvml loads the library once per process)."""
    return subprocess.run(
        [sys.executable, "-m", "falcon_gpu", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
