"""Golden files: every bundled scenario's full output in every schema, byte for byte.

A deliberate change of output is made by regenerating (``python -m tests.golden.regen``)
and reviewing the diff; anything else that changes the output fails here. Also checked:
every metric a schema declares appears in at least one golden file (so no series is
untested), and the Prometheus text is valid for promtool (lint-clean for ``falcon_gpu``;
the ``dcgm`` and ``nvidia_smi`` schemas keep their exporters' names, which promtool's naming lint
dislikes).
"""

from __future__ import annotations

import ast
import functools
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from falcon_gpu.readings.device import READINGS
from falcon_gpu.schemas import dcgm, falcon_gpu, nvidia_smi, openfalcon, profiles
from tests.golden import regen

SCENARIOS = regen.scenario_names()
REGEN = "regenerate with `python -m tests.golden.regen` and review the diff"


@functools.cache
def rendered(name: str) -> dict[str, str]:
    return regen.render(name)


def golden(name: str, file: str) -> str:
    return (regen.GOLDEN / name / file).read_text()


def test_there_is_one_golden_folder_per_bundled_scenario() -> None:
    assert len(SCENARIOS) >= 4
    folders = sorted(p.name for p in regen.GOLDEN.iterdir() if p.is_dir() and not p.name.startswith("_"))
    assert folders == SCENARIOS, REGEN
    for name in SCENARIOS:
        assert sorted(p.name for p in (regen.GOLDEN / name).iterdir()) == sorted(regen.FILES), REGEN


@pytest.mark.parametrize("file", regen.FILES)
@pytest.mark.parametrize("name", SCENARIOS)
def test_output_equals_the_golden_file(name: str, file: str) -> None:
    got, want = rendered(name)[file], golden(name, file)
    if got != want:
        diff = [f"-{w}\n+{g}" for w, g in zip(want.splitlines(), got.splitlines(), strict=False) if w != g]
        pytest.fail(f"{name}/{file} differs ({REGEN}); first difference:\n" + (diff[:1] or ["length"])[0])


def _prom_names(*files: str) -> set[str]:
    names: set[str] = set()
    for name in SCENARIOS:
        for file in files:
            for line in golden(name, file).splitlines():
                if line and not line.startswith("#"):
                    names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


@pytest.mark.parametrize(
    ("files", "specs"),
    [
        (("falcon_gpu.prom", "falcon_gpu.default.prom"), falcon_gpu.SPECS),
        (("dcgm.prom", "dcgm.default.prom"), dcgm.SPECS),
        (("nvidia_smi.prom",), nvidia_smi.SPECS),
    ],
)
def test_every_declared_metric_has_a_series_in_some_golden_file(
    files: tuple[str, ...], specs: tuple[object, ...]
) -> None:
    declared = {spec.name for spec in specs}  # type: ignore[attr-defined]
    missing = declared - _prom_names(*files)
    assert not missing, f"no scenario produces {sorted(missing)}: extend a scenario, then {REGEN}"


@pytest.mark.parametrize(("schema", "lean"), [("falcon_gpu", falcon_gpu.LEAN), ("dcgm", dcgm.LEAN)])
def test_the_default_profile_emits_its_lean_set_and_nothing_else(schema: str, lean: frozenset[str]) -> None:
    """The default goldens hold only lean families, each that some scenario has in the full goldens
    (a sparse one only where a scenario has one not 0), and ``health_worst``, which only they have."""
    default, full = _prom_names(f"{schema}.default.prom"), _prom_names(f"{schema}.prom")
    assert default <= lean
    assert (full & lean) - default <= profiles.SPARSE
    assert default - full == ({"falcon_gpu_health_worst"} if schema == "falcon_gpu" else set())
    assert len(full - default) >= (13 if schema == "falcon_gpu" else 20)


def _openfalcon_metrics() -> set[str]:
    """Every metric name the Open-Falcon schema can emit: the reading table's, and the literals it
    passes to add (or as a (metric, ...) pair in a table of its own, such as the GPM items)."""
    tree = ast.parse(Path(openfalcon.__file__).read_text())
    names = {p.name for r in READINGS if (p := r.openfalcon) is not None}
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple) and len(node.elts) == 2 and isinstance(node.elts[0], ast.Constant):
            first, second = node.elts
            if (
                isinstance(first.value, str)
                and first.value[:1].isupper()
                and isinstance(second, ast.Constant)
            ):
                names.add(first.value)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            args = node.args[1:2] if callee == "_rollup" else node.args[:1] if callee == "add" else []
            names.update(a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return names


def test_every_open_falcon_metric_appears_in_some_golden_file() -> None:
    declared = _openfalcon_metrics()
    assert {"GPUUtils", "FBUsed", "XidErrors", "PodGPUUtils", "SmActive"} <= declared  # the parse works
    seen = {
        item["metric"]
        for name in SCENARIOS
        for cycle in json.loads(golden(name, "openfalcon.json"))
        for item in cycle
    }
    assert declared - seen == set(), f"no scenario produces {sorted(declared - seen)}: {REGEN}"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is installed by scripts/test.sh")
@pytest.mark.parametrize("file", [f for f in regen.FILES if f.endswith(".prom")])
@pytest.mark.parametrize("name", SCENARIOS)
def test_golden_prometheus_text_passes_promtool(name: str, file: str) -> None:
    last_cycle = golden(name, file).rsplit("# cycle ", 1)[1].split("\n", 1)[1]
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=last_cycle, capture_output=True, text=True, timeout=30
    )
    lint_only = done.returncode == 3 and "error while linting" not in done.stderr + done.stdout
    clean = done.returncode == 0 or (not file.startswith("falcon_gpu.") and lint_only)
    assert clean, done.stderr + done.stdout
