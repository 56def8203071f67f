"""The image: built with the Dockerfile where a builder can, and installed its way into a fresh venv.

The venv test does what the Dockerfile does (wheels for the package and every dependency, then an
offline install of only those wheels, no ``-e``) from the files .dockerignore lets in, and runs the
installed ``falcon-gpu``, so a missing package-data file or dependency fails here too, without Docker.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
WHEEL = ["-m", "pip", "wheel", "--no-cache-dir", "--wheel-dir"]
INSTALL = ["install", "--no-cache-dir", "--no-index", "--find-links"]


def build_context() -> list[str]:
    """What .dockerignore lets into the build (it ignores everything, then re-includes)."""
    lines = [ln for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln and not ln.startswith("#")]
    assert lines[0] == "*"
    return [ln[1:].rstrip("/") for ln in lines[1:] if ln.startswith("!")]


def test_the_dockerfile_installs_the_way_this_test_does() -> None:
    text = DOCKERFILE.read_text()
    assert "python -m pip wheel --no-cache-dir --wheel-dir /wheels ." in text
    assert "/opt/falcon-gpu/bin/pip install --no-cache-dir --no-index --find-links /wheels falcon-gpu" in text
    assert 'ENTRYPOINT ["falcon-gpu", "run"]' in text
    assert re.search(r"^USER 10001$", text, re.M)
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M)
    assert sorted(" ".join(copied).split()) == sorted(build_context())
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    assert len(froms) == 2 and froms[-1].endswith("-slim")  # final stage: no compilers


def test_wheel_install_into_a_fresh_venv_runs(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in build_context():
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, src / name)
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, *WHEEL, str(wheels), str(src)], capture_output=True, timeout=300)
    assert built.returncode == 0, built.stderr.decode()[-3000:]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), *INSTALL, str(wheels), "falcon-gpu"], capture_output=True, timeout=300
    )
    assert pip.returncode == 0, pip.stderr.decode()[-3000:]
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import falcon_gpu; print(falcon_gpu.__file__)"],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    )  # fmt: skip
    assert where.stdout.startswith(str(venv)), where.stdout  # the installed copy, not this checkout
    done = subprocess.run(
        [str(venv / "bin" / "falcon-gpu"), "run", "--simulate", "shared-gpu", "--once"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={"PATH": "/usr/bin:/bin", "FALCON_GPU_SPOOL_DIR": str(tmp_path / "spool")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert 'pod="jupyter-alice"' in done.stdout  # the bundled scenario and its simulated host came along
    assert re.search(r'^falcon_gpu_info\{node="[^"]+",gpu="0"', done.stdout, re.M)


def docker_or_skip() -> str:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no container builder: docker is not installed")
    info = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=30)
    if info.returncode != 0:
        pytest.skip(f"no container builder: the docker daemon is not reachable ({info.stderr.strip()[:120]})")
    text = DOCKERFILE.read_text()
    version = re.search(r"^ARG PYTHON_VERSION=(\S+)$", text, re.M)[1]  # type: ignore[index]
    for base in re.findall(r"^FROM (\S+)", text, re.M):
        image = base.replace("${PYTHON_VERSION}", version)
        if subprocess.run([docker, "image", "inspect", image], capture_output=True).returncode != 0:
            pytest.skip(f"base image {image} is not present locally (docker pull {image})")
    return docker


def test_docker_build_and_run(tmp_path: Path) -> None:
    docker = docker_or_skip()
    tag = "falcon-gpu:test"
    build = subprocess.run(
        [docker, "build", "-t", tag, str(ROOT)], capture_output=True, text=True, timeout=900
    )
    assert build.returncode == 0, build.stderr[-3000:]
    try:
        run = subprocess.run(
            [docker, "run", "--rm", "--network=none", tag, "--simulate", "shared-gpu", "--once"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert 'pod="jupyter-alice"' in run.stdout
        probe = "id -u; command -v gcc cc || echo no-compiler"
        inside = subprocess.run(
            [docker, "run", "--rm", "--entrypoint", "sh", tag, "-c", probe], capture_output=True, text=True
        )
        assert inside.stdout.split() == ["10001", "no-compiler"], inside.stdout
    finally:
        subprocess.run([docker, "image", "rm", "-f", tag], capture_output=True)
