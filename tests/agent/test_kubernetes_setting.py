"""The ``kubernetes`` setting in the running agent (issue 8 item 14): ``off`` never looks,
``auto`` is quiet where there is no Kubernetes, ``on`` warns when it is missing."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from falcon_gpu.attribution import AttributionSettings, Attributor
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import Settings
from falcon_gpu.simulator.node.podresources_server import PodResourcesServer
from tests.attribution.helpers import gpu, proc, snapshot


def settings(tmp_path: Path, kubernetes: str) -> Settings:
    (tmp_path / "proc" / "4242").mkdir(parents=True)
    (tmp_path / "proc" / "4242" / "cgroup").write_text("0::/system.slice/trainer.service\n")
    return Settings(
        kubernetes=kubernetes,
        proc_root=tmp_path / "proc",
        kubelet_socket=tmp_path / "kubelet.sock",
        log_root=tmp_path / "log",
        docker_root=tmp_path / "docker",  # not the test machine's own Docker
        containers_root=tmp_path / "containers",
        passwd_file=tmp_path / "passwd",
        node="n1",
    )


def attribute(s: Settings, caplog: pytest.LogCaptureFixture) -> tuple[dict[str, bool], list[str], Telemetry]:
    telemetry = Telemetry()
    attributor = Attributor(AttributionSettings.of(s), telemetry)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="falcon_gpu"):
        try:
            attributor.refresh_now()
            result = attributor.attribute(snapshot(gpu(0, (proc(4242, 1.0, 0.5),))))
        finally:
            attributor.close()
    return result.sources_ok, [r.getMessage() for r in caplog.records], telemetry


def test_off_never_asks_the_kubelet(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server = PodResourcesServer(tmp_path / "kubelet.sock")
    server.start()
    try:
        sources, messages, _ = attribute(settings(tmp_path, "off"), caplog)
    finally:
        server.stop()
    assert server.calls == 0
    assert "kubelet" not in sources and "logs" not in sources
    assert messages == []


def test_auto_without_kubernetes_is_quiet(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sources, messages, telemetry = attribute(settings(tmp_path, "auto"), caplog)
    assert "kubelet" not in sources and "logs" not in sources
    assert messages == []
    errors = telemetry.view().errors_total
    assert errors.get("kubelet", 0) == 0 and errors.get("logs", 0) == 0


def test_auto_with_a_kubelet_reads_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server = PodResourcesServer(tmp_path / "kubelet.sock")
    server.start()
    try:
        sources, _, _ = attribute(settings(tmp_path, "auto"), caplog)
    finally:
        server.stop()
    assert server.calls >= 1 and sources["kubelet"] is True


def test_on_warns_when_kubernetes_is_missing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sources, messages, telemetry = attribute(settings(tmp_path, "on"), caplog)
    assert sources["kubelet"] is False and sources["logs"] is False
    assert any("kubelet.sock" in m for m in messages) and any("/pods" in m for m in messages), messages
    assert telemetry.view().errors_total["kubelet"] >= 1
