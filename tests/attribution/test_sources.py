"""Attribution sources are plugins (issue 9): one protocol, an ordered registry, the join
asking the chain. A source added here in a few lines is refreshed, reported and asked with
no other wiring; its failure is counted under its name, logged once, and the others go on."""

from __future__ import annotations

import ast
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from falcon_gpu.attribution import AttributionSettings, Attributor
from falcon_gpu.attribution.ledger import ContainerKey
from falcon_gpu.attribution.registry import SOURCES, SourceFactory
from falcon_gpu.attribution.source import EMPTY, SourceError, SourceView
from falcon_gpu.checks import OK, Row
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import Settings

from .helpers import HostTree, container_id, gpu, pod_uid, proc, snapshot, systemd_cgroup

ROOT = Path(__file__).resolve().parents[2]


class _PidView(SourceView):
    def __init__(self, owners: dict[int, ContainerKey]) -> None:
        self._owners = owners

    def container_of_pid(self, pid: int) -> ContainerKey | None:
        return self._owners.get(pid)


class PidFileSource:
    """A made-up source: ``<root>/owners`` lists ``pid namespace pod container`` per line."""

    name = "pid_file"
    period = 3600.0
    min_gap: float | None = None

    def __init__(self, root: Path) -> None:
        self._file = root / "owners"
        self._view: SourceView = EMPTY
        self.refreshes = 0

    def expected(self) -> bool:
        return True

    def refresh(self) -> None:
        self.refreshes += 1
        try:
            lines = self._file.read_text().splitlines()
        except OSError as exc:
            raise SourceError(f"cannot read {self._file} ({exc.strerror})") from None
        owners: dict[int, ContainerKey] = {}
        for line in lines:
            pid, namespace, pod, container = line.split()
            owners[int(pid)] = (namespace, pod, container)
        self._view = _PidView(owners)

    def recovered(self) -> str:
        return f"{self._file} readable again"

    def view(self) -> SourceView:
        return self._view

    def diagnose(self) -> tuple[list[Row], SourceView]:
        return [("pid file", OK, str(self._file))], self._view

    def close(self) -> None:
        pass


def _with(source: PidFileSource) -> tuple[SourceFactory, ...]:
    """The registry plus one line: what adding a source to ``registry.SOURCES`` amounts to."""
    return (*SOURCES, lambda context: source)


def _settings(tree: HostTree, tmp_path: Path) -> AttributionSettings:
    return AttributionSettings.of(
        Settings(
            proc_root=tree.proc,
            log_root=tree.log,
            kubelet_socket=tmp_path / "none.sock",
            node="n1",
            **tree.no_runtimes(),
        )
    )


def test_a_registered_source_is_refreshed_asked_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree = HostTree(tmp_path)
    uid, cid = pod_uid(1), container_id(1)
    tree.process(10, systemd_cgroup(uid, cid))
    tree.container("ml", "train-0", uid, "main", cid)
    tree.process(20, "0::/system.slice/mps-client.service\n")  # in no pod: only the PID source knows it
    source = PidFileSource(tmp_path)
    telemetry = Telemetry()
    attributor = Attributor(_settings(tree, tmp_path), telemetry, sources=_with(source))
    snap = snapshot(gpu(0, (proc(10, 2, 0.25), proc(20, 3, 0.5))))
    try:
        with caplog.at_level(logging.INFO, logger="falcon_gpu"):
            attributor.refresh_now()  # no owners file yet: failing, the others go on
            broken = attributor.attribute(snap)
            attributor.refresh_now()
            attributor.attribute(snap)
        assert broken.sources_ok == {
            "cgroup": True,
            "kubelet": False,
            "logs": True,
            "pid_file": False,
        }
        assert {p.container.pod: p.memory_used_bytes for p in broken.pods} == {"train-0": 2 << 30}
        assert [u.processes for u in broken.unattributed] == [1]
        assert telemetry.view().errors_total["pid_file"] == 2
        logged = [r.getMessage() for r in caplog.records if "owners" in r.getMessage()]
        assert logged == [f"cannot read {tmp_path / 'owners'} (No such file or directory)"]  # once
        assert attributor.health()["pid_file"].last_error == logged[0]

        (tmp_path / "owners").write_text("20 hpc mps-job worker\n")
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="falcon_gpu"):
            attributor.refresh_now()
        fixed = attributor.attribute(snap)
    finally:
        attributor.close()
    assert fixed.sources_ok["pid_file"] is True and attributor.health()["pid_file"].last_error is None
    assert f"{tmp_path / 'owners'} readable again" in [r.getMessage() for r in caplog.records]
    usage = {(p.container.namespace, p.container.pod, p.container.container): p for p in fixed.pods}
    assert set(usage) == {("ml", "train-0", "main"), ("hpc", "mps-job", "worker")}
    assert usage[("hpc", "mps-job", "worker")].memory_used_bytes == 3 << 30
    assert usage[("hpc", "mps-job", "worker")].utilization_ratio == 0.5
    assert [u.processes for u in fixed.unattributed] == [0]
    assert source.refreshes == 3


def test_doctor_asks_every_registered_source(tmp_path: Path) -> None:
    tree = HostTree(tmp_path)
    (tmp_path / "owners").write_text("20 hpc mps-job worker\n")
    tree.process(20, "0::/system.slice/mps-client.service\n")
    attributor = Attributor(_settings(tree, tmp_path), Telemetry(), sources=_with(PidFileSource(tmp_path)))
    try:
        rows = attributor.diagnose(snapshot(gpu(0, (proc(20, 1, 0.1),))))
    finally:
        attributor.close()
    assert [r[0] for r in rows] == [
        "host PIDs visible",
        "kubelet socket",
        "log dirs",
        "container names (Docker, Podman)",
        "user names (passwd)",
        "pid file",
        "GPU processes attributed",
    ]


def test_attribution_settings_are_taken_from_the_agent_settings(tmp_path: Path) -> None:
    s = Settings(
        node="gpu-7",
        interval=2,
        proc_root=tmp_path / "p",
        kubelet_socket=tmp_path / "k.sock",
        log_root=tmp_path / "l",
        kubernetes="on",
        gpu_resources=["example.com/gpu"],
        pod_labels=["team"],
        process_metrics=True,
    )
    a = AttributionSettings.of(s)
    assert (a.node, a.interval, a.proc_root, a.kubelet_socket, a.log_root) == (
        "gpu-7",
        2,
        tmp_path / "p",
        tmp_path / "k.sock",
        tmp_path / "l",
    )
    assert (a.kubernetes, a.gpu_resources, a.pod_labels, a.process_metrics) == (
        "on",
        ("example.com/gpu",),
        ("team",),
        True,
    )
    assert (a.refresh_period, a.retention) == (5.0, 600.0)  # clamped to 5..30 s; at least 600 s


def test_no_attribution_module_imports_the_simulator() -> None:
    """The PodResources test server lives in the simulator; attribution must not reach it."""
    offenders = []
    for path in sorted((ROOT / "falcon_gpu" / "attribution").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("falcon_gpu.simulator")]
    assert offenders == []


def test_the_agent_loads_no_simulator_to_attribute() -> None:
    code = (
        "import sys\n"
        "from falcon_gpu.attribution import Attributor\n"
        "import falcon_gpu.attribution.podresources.client, falcon_gpu.attribution.diagnose\n"
        "from falcon_gpu.attribution.podresources.stubs import api_pb2_grpc\n"
        "print(sorted(m for m in sys.modules if m.startswith('falcon_gpu.simulator')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
