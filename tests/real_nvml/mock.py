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

import json
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
    """The environment of a falcon-gpu command on the real bindings: ``[metrics] profile = "full"``
    (the tier checks every reading value by value; ``extra`` may ask for the default profile)."""
    kept = ("FALCON_GPU_JOBS_DIR",)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FALCON_GPU_") or k in kept}
    env["FALCON_GPU_METRICS__PROFILE"] = "full"
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


# -- every command on one node ------------------------------------------------------------------

NODE = "real-nvml-node"
"""The ``node`` setting of every command the tier runs (the endpoint / Hostname it must print)."""
SCHEMAS = ("falcon_gpu", "dcgm", "nvidia_smi")
"""The Prometheus schemas; Open-Falcon is what ``plugin`` (and the falcon format) prints."""


def device_config(profile: dict[str, Any], index: int) -> dict[str, Any]:
    """What the mock serves for GPU ``index``: ``device_defaults`` with the device's override merged in."""
    override = next(d for d in profile["devices"] if d["index"] == index)
    return _merged(profile["device_defaults"], override)


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = (
            _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        )
    return out


def settings_file(path: Path, schema: str) -> Path:
    """A settings file for ``run --once``: ``schema``, per-process series, and two stdout sinks in one
    process (the samples as JSON, then the Open-Falcon items), each one line of stdout."""
    path.write_text(
        f'schema = "{schema}"\nprocess_metrics = true\n'
        '[[sinks]]\ntype = "stdout"\nname = "json"\nformat = "json"\n'
        '[[sinks]]\ntype = "stdout"\nname = "falcon"\nformat = "falcon"\n'
    )
    return path


class Outputs:
    """What every command printed on one node: parsed stdout, and each command's stderr and exit code."""

    def __init__(self) -> None:
        self.samples: dict[str, list[dict[str, Any]]] = {}
        """Per Prometheus schema, ``run --once``'s samples (name, labels, value)."""
        self.run_falcon: list[dict[str, Any]] = []
        """``run --once``'s Open-Falcon items (its falcon-format stdout sink)."""
        self.plugin: list[dict[str, Any]] = []
        """``plugin``'s Open-Falcon items."""
        self.doctor = ""
        self.top = ""
        self.stderr: dict[str, str] = {}
        self.returncode: dict[str, int] = {}

    def values(self, schema: str, name: str, **labels: str) -> list[float]:
        """The values of the samples named ``name`` whose labels include ``labels``."""
        return [
            s["value"]
            for s in self.samples[schema]
            if s["name"] == name and all(s["labels"].get(k) == v for k, v in labels.items())
        ]

    def value(self, schema: str, name: str, **labels: str) -> float:
        found = self.values(schema, name, **labels)
        assert len(found) == 1, f"{name}{labels}: {len(found)} samples in {schema}"
        return found[0]

    def falcon(self, metric: str, gpu: int, items: list[dict[str, Any]] | None = None) -> float:
        """The value of Open-Falcon ``metric`` of GPU ``gpu`` (the plugin's unless ``items``)."""
        tag = f"GpuId={gpu},"
        found = [i["value"] for i in (self.plugin if items is None else items)
                 if i["metric"] == metric and i["tags"].startswith(tag)]  # fmt: skip
        assert len(found) == 1, f"{metric} of GPU {gpu}: {len(found)} items"
        value: float = found[0]
        return value


def run_commands(lib_dir: Path, profile_path: Path | None, work: Path) -> Outputs:
    """Every one-shot command on one node, side by side (each its own process: pynvml loads the
    library once per process): ``run --once`` in each Prometheus schema (with the Open-Falcon items
    beside), ``plugin``, ``doctor`` and ``top --once``."""
    work.mkdir(parents=True, exist_ok=True)
    env = environment(lib_dir, profile_path, FALCON_GPU_NODE=NODE, FALCON_GPU_JOBS_DIR=str(work / "jobs"))
    env["COLUMNS"] = "200"  # `top --once` piped is 80 columns wide: the checks read its whole rows
    commands: dict[str, list[str]] = {
        f"run:{schema}": ["run", "--once", "--config", str(settings_file(work / f"{schema}.toml", schema))]
        for schema in SCHEMAS
    }
    commands |= {"plugin": ["plugin"], "doctor": ["doctor"], "top": ["top", "--once"]}
    running = {
        key: subprocess.Popen(
            [sys.executable, "-m", "falcon_gpu", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for key, args in commands.items()
    }
    out = Outputs()
    texts: dict[str, str] = {}
    for key, proc in running.items():
        texts[key], out.stderr[key] = proc.communicate(timeout=120)
        out.returncode[key] = proc.returncode
    for schema in SCHEMAS:
        lines = texts[f"run:{schema}"].splitlines()
        assert len(lines) == 2, (
            f"run --once ({schema}): {texts[f'run:{schema}']!r}\n{out.stderr[f'run:{schema}']}"
        )
        out.samples[schema] = json.loads(lines[0])["samples"]
        if schema == "falcon_gpu":
            out.run_falcon = json.loads(lines[1])
    out.plugin = json.loads(texts["plugin"])
    out.doctor, out.top = texts["doctor"], texts["top"]
    return out
