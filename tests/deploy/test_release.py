"""The release: the sdist and wheel as `python -m build` makes them and `twine check` accepts, and the
release workflow (.github/workflows/release.yml), which cannot run here, checked with actionlint and by
running its own shell steps: the tag check, and the notes taken from CHANGELOG.md's section."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    found = shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    assert found, f"{name} is not installed: it comes with the test extra"
    return found


def step(job: str, name: str) -> str:
    """The shell of one step of the workflow, as the runner would execute it."""
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"][job]["steps"]
    return next(s["run"] for s in steps if s.get("name") == name)


def run_step(script: str, cwd: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    output = tmp_path / "github_output"
    output.touch()
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60,
        env={"PATH": f"{BIN}{os.pathsep}/usr/bin:/bin", "RUNNER_TEMP": str(tmp_path),
             "GITHUB_OUTPUT": str(output), **env},
    )  # fmt: skip


def changelog_section(text: str, version: str) -> str:
    """The section's body as a reader sees it: from its heading to the next second-level one."""
    found = re.search(rf"^## \[?{re.escape(version)}\]?(?: .*)?\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, f"CHANGELOG.md has no '## {version}' section"
    return found[1]


def test_actionlint_passes_the_release_workflow() -> None:
    done = subprocess.run([tool("actionlint"), str(WORKFLOW)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_workflow_releases_on_a_tag_with_tests_dist_signed_multiarch_image() -> None:
    flow = yaml.safe_load(WORKFLOW.read_text())
    assert flow[True]["push"]["tags"] == ["v*"]  # YAML 1.1 reads the key `on` as True
    jobs = flow["jobs"]
    assert any(s.get("run") == "bash scripts/test.sh" for s in jobs["test"]["steps"])
    push = next(s for s in jobs["image"]["steps"] if s.get("uses", "").startswith("docker/build-push-action"))
    assert push["with"]["platforms"] == "linux/amd64,linux/arm64" and push["with"]["push"] is True
    assert "cosign sign --yes" in step("image", "Sign the image (keyless)")
    assert jobs["image"]["permissions"]["id-token"] == "write"
    assert set(jobs["image"]["needs"]) == {"test", "dist"} and "image" in jobs["release"]["needs"]


def test_the_release_notes_are_changelogs_section_for_the_current_version(tmp_path: Path) -> None:
    notes_step = step("release", "Release notes from CHANGELOG.md")
    done = run_step(notes_step, ROOT, tmp_path, TAG=f"v{VERSION}")
    assert done.returncode == 0, done.stdout + done.stderr
    notes = (tmp_path / "notes.md").read_text()
    assert notes.strip() and notes == changelog_section((ROOT / "CHANGELOG.md").read_text(), VERSION)
    assert (tmp_path / "github_output").read_text() == f"file={tmp_path / 'notes.md'}\n"


def test_the_notes_step_takes_headings_with_brackets_and_dates_and_fails_without_a_section(
    tmp_path: Path,
) -> None:
    notes_step = step("release", "Release notes from CHANGELOG.md")
    (tmp_path / "CHANGELOG.md").write_text(
        "# Changelog\n\n## Unreleased\n- next\n\n## [0.3.0] - 2027-01-02\n### Added\n- three\n\n"
        "## 0.3.0rc1\n- not this\n\n## 0.2.0\n- two\n"
    )
    done = run_step(notes_step, tmp_path, tmp_path, TAG="v0.3.0")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "notes.md").read_text() == "### Added\n- three\n\n"
    missing = run_step(notes_step, tmp_path, tmp_path, TAG="v9.9.9")
    assert missing.returncode == 1 and "CHANGELOG.md has no section for 9.9.9" in missing.stdout


def test_the_tag_must_name_pyprojects_version(tmp_path: Path) -> None:
    check = step("dist", "The tag names the package's version")
    assert run_step(check, ROOT, tmp_path, TAG=f"v{VERSION}").returncode == 0
    wrong = run_step(check, ROOT, tmp_path, TAG="v0.0.0-not-this")
    assert wrong.returncode == 1 and f"does not match pyproject.toml's version {VERSION}" in wrong.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python -m build` (sdist, then the wheel from the sdist) from the files git would release."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(src)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]
    return out


def test_sdist_and_wheel_pass_twine_check(dist: Path) -> None:
    files = sorted(p.name for p in dist.iterdir())
    assert files == [f"falcon_gpu-{VERSION}-py3-none-any.whl", f"falcon_gpu-{VERSION}.tar.gz"], files
    done = subprocess.run(
        [tool("twine"), "check", "--strict", *map(str, dist.iterdir())],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_wheel_carries_the_license_and_package_data(dist: Path) -> None:
    with zipfile.ZipFile(dist / f"falcon_gpu-{VERSION}-py3-none-any.whl") as wheel:
        names = wheel.namelist()
        metadata = wheel.read(f"falcon_gpu-{VERSION}.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()  # SPDX, not the deprecated table
    assert "License-File: LICENSE" in metadata.splitlines()
    assert f"falcon_gpu-{VERSION}.dist-info/licenses/LICENSE" in names
    assert "falcon_gpu/py.typed" in names
    assert any(re.fullmatch(r"falcon_gpu/simulator/scenarios/shared-gpu\.json", n) for n in names)
    assert any(n.endswith(".proto") for n in names)
    with tarfile.open(dist / f"falcon_gpu-{VERSION}.tar.gz") as sdist:
        members = sdist.getnames()
    assert f"falcon_gpu-{VERSION}/LICENSE" in members and f"falcon_gpu-{VERSION}/CHANGELOG.md" not in members
