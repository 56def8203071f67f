"""Names from the kubelet's log directories, rescans, and the refresh on a miss."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from falcon_gpu.attribution import AttributionSettings, Attributor
from falcon_gpu.attribution.logdirs import ContainerName, LogDirScanner, PodName, parse_container_log
from falcon_gpu.attribution.refresher import Refresher
from falcon_gpu.attribution.sources.kubelet import KubeletSource
from falcon_gpu.attribution.sources.logs import LogDirSource
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import Settings

from .helpers import HostTree, container_id, gpu, pod_uid, proc, snapshot, systemd_cgroup


def test_container_log_names() -> None:
    cid = container_id(7)
    name = f"web-7d9f8-x2x_prod-eu_nginx-sidecar-{cid}.log"
    target = f"/var/log/pods/prod-eu_web-7d9f8-x2x_{pod_uid(7)}/nginx-sidecar/0.log"
    assert parse_container_log(name, target) == (
        cid,
        ContainerName("prod-eu", "web-7d9f8-x2x", "nginx-sidecar", pod_uid(7)),
    )
    assert parse_container_log(name) == (cid, ContainerName("prod-eu", "web-7d9f8-x2x", "nginx-sidecar"))
    assert parse_container_log("kube-apiserver.log") is None
    assert parse_container_log(f"a_b_c-{cid}.log.gz") is None


def test_scan_follows_pods_coming_and_going(tmp_path: Path) -> None:
    tree = HostTree(tmp_path)
    tree.container("ml", "train-0", pod_uid(1), "main", container_id(1))
    tree.container("ml", "train-0", pod_uid(1), "sidecar", container_id(2))
    (tree.log / "pods" / "not-a-pod-dir").mkdir()
    scanner = LogDirScanner(tree.log)
    maps = scanner.scan()
    assert maps.pods == {pod_uid(1): PodName("ml", "train-0")}
    assert maps.containers[container_id(2)] == ContainerName("ml", "train-0", "sidecar", pod_uid(1))
    tree.container("web", "api-1", pod_uid(2), "app", container_id(3))
    tree.remove_pod("ml", "train-0", pod_uid(1))
    maps = scanner.scan()
    assert maps.pods == {pod_uid(2): PodName("web", "api-1")}
    assert set(maps.containers) == {container_id(3)}


def test_scan_of_a_missing_dir_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        LogDirScanner(tmp_path / "nope").scan()


def test_refresher_rate_limits_requests() -> None:
    runs: list[str] = []
    done = threading.Event()

    def task() -> None:
        runs.append("x")
        if len(runs) >= 2:
            done.set()

    refresher = Refresher()
    refresher.add("x", task, period=3600, min_gap=3600)
    refresher.run("x")
    assert refresher.request("x") is False  # ran just now: rate-limited
    refresher.add("y", task, period=3600, min_gap=0)
    refresher.start()
    refresher.start()  # idempotent
    try:
        assert done.wait(10)  # the first background pass runs every task once
        count = len(runs)
        assert refresher.request("y") is True
        deadline = time.monotonic() + 10
        while len(runs) == count and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(runs) == count + 1
    finally:
        refresher.stop()


def test_unknown_container_triggers_a_background_rescan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(LogDirSource, "min_gap", 0.0)
    monkeypatch.setattr(KubeletSource, "min_gap", 0.0)
    tree = HostTree(tmp_path)
    settings = Settings(
        proc_root=tree.proc, log_root=tree.log, kubelet_socket=tmp_path / "none.sock", node="n", interval=3600
    )
    telemetry = Telemetry()
    attributor = Attributor(AttributionSettings.of(settings), telemetry)
    attributor.start()
    try:
        uid, cid = pod_uid(5), container_id(5)
        tree.process(77, systemd_cgroup(uid, cid))
        snap = snapshot(gpu(0, (proc(77, 1, 0.4),)))
        deadline = time.monotonic() + 10
        first = attributor.attribute(snap)
        assert first.pods == () or first.pods[0].container.pod != "late-0"
        tree.container("ml", "late-0", uid, "main", cid)  # the pod's log link appears after the cycle
        pods: tuple[str, ...] = ()
        while time.monotonic() < deadline:
            pods = tuple(p.container.pod for p in attributor.attribute(snap).pods)
            if pods:
                break
            time.sleep(0.02)
        assert pods == ("late-0",)
        assert telemetry.view().errors_total["attribution_unresolved"] >= 1
    finally:
        attributor.close()


def test_invisible_host_pids_are_reported_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(
        proc_root=tmp_path,
        log_root=tmp_path,
        kubelet_socket=tmp_path / "none.sock",
        node="n",
        kubernetes="on",
    )
    telemetry = Telemetry()
    attributor = Attributor(AttributionSettings.of(settings), telemetry)
    snap = snapshot(gpu(0, (proc(31337, 1, 0.5),)))
    try:
        for _ in range(3):
            result = attributor.attribute(snap)
        rows = {check: (ok, detail) for check, ok, detail in attributor.diagnose(snap)}
    finally:
        attributor.close()
    assert result.sources_ok["cgroup"] is False
    assert [(u.processes, u.memory_used_bytes > 0) for u in result.unattributed] == [(1, True)]
    assert telemetry.view().errors_total["cgroup"] == 3
    assert len([r for r in caplog.records if "hostPID" in r.getMessage()]) == 1
    assert rows["host PIDs visible"][0] == "FAIL" and "hostPID" in rows["host PIDs visible"][1]
    assert rows["kubelet socket"][0] == "FAIL" and rows["log dirs"][0] == "FAIL"


def test_missing_log_dirs_are_counted_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(
        proc_root=tmp_path,
        log_root=tmp_path / "nope",
        kubelet_socket=tmp_path / "none.sock",
        node="n",
        kubernetes="on",
    )
    telemetry = Telemetry()
    attributor = Attributor(AttributionSettings.of(settings), telemetry)
    try:
        attributor.refresh_now()
        attributor.refresh_now()
        result = attributor.attribute(snapshot(gpu(0)))
    finally:
        attributor.close()
    assert result.sources_ok["logs"] is False
    assert telemetry.view().errors_total["logs"] == 2
    assert len([r for r in caplog.records if "log_root" in r.getMessage()]) == 1
