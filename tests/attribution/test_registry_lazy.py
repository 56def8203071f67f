"""The registry imports a source's module only when the source applies (issue 9, plugin
start-up): the stand-in says what the real source would, and a source that starts to apply
after start-up (Docker installed, a kubelet started) is built and answers on the next refresh."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from msgspec.structs import replace

from falcon_gpu.attribution import AttributionSettings, Attributor
from falcon_gpu.attribution.deferred import DeferredSource
from falcon_gpu.attribution.registry import SOURCES, SourceEntry
from falcon_gpu.attribution.source import EMPTY, SourceContext
from falcon_gpu.model.telemetry import Telemetry

from .helpers import HostTree, gpu, proc, snapshot
from .test_containers import A, docker_container, podman_containers

ENTRIES = [entry for entry in SOURCES if isinstance(entry, SourceEntry)]


def _settings(tmp_path: Path, **extra: object) -> AttributionSettings:
    return AttributionSettings(
        node="n1",
        proc_root=tmp_path / "proc",
        kubelet_socket=tmp_path / "kubelet.sock",
        log_root=tmp_path / "log",
        docker_root=tmp_path / "docker",
        containers_root=tmp_path / "containers",
        passwd_file=tmp_path / "passwd",
        **extra,  # type: ignore[arg-type]
    )


def _context(settings: AttributionSettings) -> SourceContext:
    return SourceContext(settings, time.monotonic, Telemetry())


def _everything_present(tmp_path: Path) -> AttributionSettings:
    (tmp_path / "kubelet.sock").touch()
    (tmp_path / "log" / "pods").mkdir(parents=True)
    docker_container(tmp_path / "docker", A, "trainer")
    podman_containers(tmp_path / "containers", [])
    (tmp_path / "passwd").write_text("alice:x:1000:1000::/home/alice:/bin/sh\n")
    return _settings(tmp_path, pod_labels=("team",))


def test_every_source_is_in_the_registry_as_a_lazy_entry() -> None:
    assert [e.name for e in ENTRIES] == ["kubelet", "logs", "kube_api", "containers", "passwd"]
    assert len(ENTRIES) == len(SOURCES)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_an_entry_says_what_its_source_would(entry: SourceEntry, tmp_path: Path) -> None:
    """Name, period and early-refresh gap are told to the refresher before the import: they must be
    the source's own; and the cheap test agrees with the source's ``expected``, present or not."""
    absent, present = _settings(tmp_path / "none"), _everything_present(tmp_path)
    for settings in (absent, present):
        real = entry.load()(_context(settings))
        if real is None:  # not configured (kube_api without pod_labels): the test says no as well
            assert (entry.name, settings, entry.applies(settings)) == ("kube_api", absent, False)
            continue
        try:
            assert (real.name, real.period, real.min_gap) == (
                entry.name,
                settings.refresh_period if entry.period is None else entry.period,
                entry.min_gap,
            )
            assert entry.applies(settings) is real.expected() is (settings is present)
        finally:
            real.close()


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_a_source_that_does_not_apply_is_a_quiet_stand_in(entry: SourceEntry, tmp_path: Path) -> None:
    source = entry(_context(_settings(tmp_path)))
    assert isinstance(source, DeferredSource)
    assert (source.expected(), source.view()) == (False, EMPTY)
    source.close()


def test_docker_installed_after_start_up_is_picked_up_on_the_next_refresh(tmp_path: Path) -> None:
    tree = HostTree(tmp_path)
    tree.process(10, f"0::/system.slice/docker-{A}.scope\n")
    settings = replace(_settings(tmp_path, kubernetes="off"), proc_root=tree.proc)
    snap = snapshot(gpu(0, (proc(10, 1, 0.5),)))
    attributor = Attributor(settings, Telemetry())
    try:
        attributor.refresh_now()
        before = attributor.attribute(snap)
        docker_container(tmp_path / "docker", A, "trainer")
        attributor.refresh_now()
        after = attributor.attribute(snap)
    finally:
        attributor.close()
    assert before.sources_ok == {"cgroup": True}
    assert [(c.runtime, c.name) for c in before.containers] == [("docker", A[:12])]
    assert after.sources_ok == {"cgroup": True, "containers": True}
    assert [(c.runtime, c.name) for c in after.containers] == [("docker", "trainer")]


def test_doctor_gets_the_real_sources_rows_from_a_stand_in(tmp_path: Path) -> None:
    """doctor builds the source behind a stand-in: its SKIP row says why; an unconfigured one has none."""
    context = _context(_settings(tmp_path))
    by_name = {e.name: e(context) for e in ENTRIES}
    try:
        kubelet_rows, kubelet_view = by_name["kubelet"].diagnose()
        assert by_name["kube_api"].diagnose() == ([], EMPTY)  # pod_labels unset: never configured
        assert by_name["kube_api"].expected() is False
    finally:
        for source in by_name.values():
            source.close()
    assert kubelet_rows == [
        ("kubelet socket", "SKIP", "no kubelet socket or pod log dirs here; not a Kubernetes node")
    ]
    assert kubelet_view is EMPTY
