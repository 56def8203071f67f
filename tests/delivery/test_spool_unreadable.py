"""Issue 19, item 1: one unreadable spool segment must not stop a sink's delivery for good.

The backlog of two outages is spooled by two ``run --once`` agents (one segment each, labelled
``run="a"`` and ``run="b"``); the older segment is then made unreadable: replaced by a directory
of its name (works as root too), or ``chmod 000`` with the agent running as an unprivileged user
(``setpriv``, as the systemd unit's ``DynamicUser`` does). An agent started against a real
Prometheus must deliver ``run="b"`` and its own cycles, count the segment in
``errors_total{kind="spool_read"}``, rename it (never delete it) and say so once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from falcon_gpu.delivery.segment import segment_seq
from tests.delivery.conftest import ManagedServer, free_port, prom_query, wait_until

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534


def config(root: Path, spool: Path, run: str, url: str) -> Path:
    path = root / f"{run}.toml"
    path.write_text(
        f'node = "unreadable-node"\ninterval = 1\nspool_dir = "{spool}"\njobs_dir = "{root / "jobs"}"\n'
        f'labels = {{run = "{run}"}}\n'
        f'[[sinks]]\ntype = "remote_write"\nurl = "{url}"\nretry_max_delay = 0.5\ntimeout = 2\n'
    )
    path.chmod(0o644)
    return path


def once(root: Path, spool: Path, run: str) -> None:
    """One cycle spooled against a server that is down."""
    cfg = config(root, spool, run, f"http://127.0.0.1:{free_port()}/api/v1/write")
    argv = [sys.executable, "-m", "falcon_gpu", "run", "--once", "--simulate", "--config", str(cfg)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "dropped" not in done.stderr, done.stderr


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A directory an unprivileged user can reach (pytest's tmp_path is root's, mode 0700)."""
    root = Path(tempfile.mkdtemp(prefix="falcon-gpu-unreadable-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def segments(spool: Path) -> list[Path]:
    return sorted(p for p in spool.iterdir() if segment_seq(p) is not None)


@pytest.mark.servers
@pytest.mark.parametrize("damage", ["directory", "chmod_000_unprivileged"])
def test_an_unreadable_segment_is_set_aside_and_everything_after_it_delivered(
    prometheus: ManagedServer, shared_root: Path, damage: str
) -> None:
    as_user: list[str] = []
    if damage == "chmod_000_unprivileged":
        if os.geteuid() != 0 or shutil.which("setpriv") is None:
            pytest.skip("running the agent as another user needs root and setpriv (util-linux)")
        as_user = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    spool = shared_root / "spool"
    (shared_root / "jobs").mkdir()
    once(shared_root, spool, "a")
    once(shared_root, spool, "b")
    older, _newer = segments(spool / "remote_write")
    if damage == "directory":
        older.unlink()
        older.mkdir()
    else:
        for path in [shared_root, *shared_root.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
        older.chmod(0)
    cfg = config(shared_root, spool, "c", prometheus.url + "/api/v1/write")
    log = shared_root / "agent.log"
    argv = [*as_user, sys.executable, "-m", "falcon_gpu", "run", "--simulate", "--config", str(cfg)]
    env = {**os.environ, "XDG_CACHE_HOME": str(shared_root / "cache")}
    env.pop("FALCON_GPU_JOBS_DIR", None)  # the one in the config, writable by the agent's user
    with log.open("wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, env=env)

    def runs() -> set[str]:
        return {r["metric"]["run"] for r in prom_query(prometheus, "falcon_gpu_agent_cycles_total[10m]")}

    try:
        wait_until(lambda: runs() >= {"b", "c"}, 60, f"the batches after the bad segment: {log}")
        errors = 'falcon_gpu_agent_errors_total{kind="spool_read",run="c"}'
        wait_until(lambda: bool(prom_query(prometheus, errors)), 30, "the error counted")
        assert float(prom_query(prometheus, errors)[0]["value"][1]) == 1
    finally:
        proc.terminate()
        code = proc.wait(60)
    text = log.read_text()
    assert code == 0, text
    assert "a" not in runs(), "the unreadable segment's batches cannot have been sent"
    moved = older.with_name(older.name + ".unreadable")
    assert moved.exists() and not older.exists(), "set aside, never deleted"
    assert text.count("cannot read spool segment") == 1, text
    assert str(older) in text and str(moved) in text and "delete the file once" in text, text
    assert "cannot read the spool (" not in text, text
