"""Requested vs used: the containers' GPU quotas from the API server's pod list, on pod series."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.attribution import AttributionSettings, Attributor
from falcon_gpu.attribution.kube_api import KubeApiConfig, PodLabelSource
from falcon_gpu.attribution.pod_requests import MIB, Requested, container_requested
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.schemas import falcon_gpu
from falcon_gpu.settings import Settings

from .helpers import HostTree, container_id, gpu, pod_uid, proc, snapshot, systemd_cgroup
from .test_kube_api import TOKEN, FakeApiServer, pod_item

GIB = 1 << 30


def main(resources: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": "main", "resources": resources}, {"name": "sidecar", "resources": {}}]


HAMI = {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096", "nvidia.com/gpucores": "30"}}
VCUDA = {"requests": {"tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "8"}}
WHOLE = {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "2"}}
PODS = [
    [
        pod_item("ml", "infer-0", pod_uid(1), {"team": "a"}, main(HAMI)),
        pod_item("ml", "tke-0", pod_uid(2), {"team": "b"}, main(VCUDA)),
    ],
    [
        pod_item("ml", "train-0", pod_uid(3), {"team": "c"}, main(WHOLE)),
        pod_item("ml", "cpu-0", pod_uid(4), {"team": "d"}, main({"limits": {"cpu": "1"}})),
    ],
]


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (HAMI, Requested(4096 * MIB, 0.3)),
        (VCUDA, Requested(2 * GIB, 0.5)),
        (
            {"limits": {"tencent.com/vcuda-core": "200", "tencent.com/vcuda-memory": "64"}},
            Requested(8 * GIB, 1.0),
        ),
        (WHOLE, Requested(None, 1.0)),
        ({"limits": {"nvidia.com/gpumem": "1024"}}, Requested(GIB, None)),
        ({"limits": {"nvidia.com/gpu": "0"}}, None),
        ({"limits": {"cpu": "1"}}, None),
        ({"limits": {"nvidia.com/gpumem": "1Gi"}}, None),  # not an integer: HAMi counts MiB
        ({}, None),
        # a quota of 0 reserves nothing: no ratio to it (it would be +Inf), never a whole GPU
        (
            {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096", "nvidia.com/gpucores": "0"}},
            Requested(4096 * MIB, None),
        ),
        ({"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "0"}}, None),
        (
            {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "0", "nvidia.com/gpucores": "25"}},
            Requested(None, 0.25),
        ),
        ({"limits": {"tencent.com/vcuda-core": "0", "tencent.com/vcuda-memory": "4"}}, Requested(GIB, None)),
        ({"limits": {"tencent.com/vcuda-core": "0"}}, None),
        # HAMi memory with no gpucores: HAMi's defaultCores (0) reserved no compute, not a whole GPU
        ({"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2048"}}, Requested(2048 * MIB, None)),
        ({"limits": {"nvidia.com/gpu.shared": "1"}}, Requested(None, 1.0)),  # a time-sliced replica
    ],
)
def test_units(resources: dict[str, Any], expected: Requested | None) -> None:
    assert container_requested(resources) == expected


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    server = FakeApiServer(PODS)
    yield server
    server.close()


@pytest.fixture
def token(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def test_labels_and_requests_come_from_one_list(api: FakeApiServer, token: Path) -> None:
    source = PodLabelSource(KubeApiConfig(api.url, token, None), "node-7", ["team"], quotas=True)
    found = source.fetch()
    source.close()
    assert len(api.requests) == 2  # the two pages of one list, not a list per setting
    assert found.requested == {
        ("ml", "infer-0", "main"): Requested(4096 * MIB, 0.3),
        ("ml", "tke-0", "main"): Requested(2 * GIB, 0.5),
        ("ml", "train-0", "main"): Requested(None, 1.0),
    }
    assert found.by_name[("ml", "cpu-0")] == (("label_team", "d"),)


def test_without_pod_requests_no_quota_is_kept(api: FakeApiServer, token: Path) -> None:
    source = PodLabelSource(KubeApiConfig(api.url, token, None), "node-7", ["team"])
    assert source.fetch().requested == {}
    source.close()


def _attributor(
    tmp_path: Path, api: FakeApiServer, token: Path, telemetry: Telemetry, **kw: Any
) -> Attributor:
    tree = HostTree(tmp_path)
    for n in (1, 2, 3, 4):  # names and UIDs from the log dirs
        tree.process(10 + n, systemd_cgroup(pod_uid(n), container_id(n)))
        tree.container(
            "ml", ("infer-0", "tke-0", "train-0", "cpu-0")[n - 1], pod_uid(n), "main", container_id(n)
        )
    settings = Settings(
        proc_root=tree.proc, log_root=tree.log, kubelet_socket=tmp_path / "none.sock", node="node-7", **kw
    )
    return Attributor(
        AttributionSettings.of(settings, kube_api=KubeApiConfig(api.url, token, None)), telemetry
    )


SNAP = snapshot(
    gpu(0, (proc(11, 1, 0.2),)),
    gpu(1, (proc(12, 1, 0.25),)),
    gpu(2, (proc(13, 2, 0.5), proc(14, 1, 0.1))),
)


def _series(attributor: Attributor, telemetry: Telemetry) -> dict[tuple[str, str, str], float]:
    att = attributor.attribute(SNAP)
    cycle = CycleData(
        node="node-7", step=60, snapshot=SNAP, attribution=att, health={}, telemetry=telemetry.view()
    )
    out: dict[tuple[str, str, str], float] = {}
    for family in falcon_gpu.render(cycle).families:
        if family.name.startswith("falcon_gpu_pod_"):
            for s in family.series:
                labels = dict(s.labels)
                out[(family.name, labels["pod"], labels["gpu"])] = s.value
    return out


def test_requested_vs_used_end_to_end(tmp_path: Path, api: FakeApiServer, token: Path) -> None:
    telemetry = Telemetry()
    attributor = _attributor(tmp_path, api, token, telemetry, pod_requests=True)
    try:
        attributor.refresh_now()
        series = _series(attributor, telemetry)
        requested_mem = {
            k[1:]: v for k, v in series.items() if k[0] == "falcon_gpu_pod_requested_memory_bytes"
        }
        requested_sm = {
            k[1:]: v for k, v in series.items() if k[0] == "falcon_gpu_pod_requested_compute_ratio"
        }
        assert requested_mem == {("infer-0", "0"): 4096 * MIB, ("tke-0", "1"): 2 * GIB}
        assert requested_sm == {("infer-0", "0"): 0.3, ("tke-0", "1"): 0.5, ("train-0", "2"): 1.0}
        # the scenario's used / requested: 1 GiB of 4 GiB, 0.2 of 0.3; 1 of 2 GiB, 0.25 of 0.5; 0.5 of 1
        used = "falcon_gpu_pod_memory_used_bytes"
        assert series[(used, "infer-0", "0")] / requested_mem[("infer-0", "0")] == 0.25
        assert series[(used, "tke-0", "1")] / requested_mem[("tke-0", "1")] == 0.5
        sm = "falcon_gpu_pod_utilization_ratio"
        assert series[(sm, "infer-0", "0")] / requested_sm[("infer-0", "0")] == pytest.approx(2 / 3)
        assert series[(sm, "train-0", "2")] / requested_sm[("train-0", "2")] == 0.5
        assert (used, "cpu-0", "2") in series  # used but requested nothing: no requested series
        assert not any(k[1] == "cpu-0" for k in requested_sm) and not any(
            k[1] == "cpu-0" for k in requested_mem
        )

        api.status = 500  # the API server fails: counted, logged once, the last quotas stay
        attributor.refresh_now()
        again = _series(attributor, telemetry)
        assert again[("falcon_gpu_pod_requested_compute_ratio", "tke-0", "1")] == 0.5
        assert telemetry.view().errors_total["kube_api"] == 1
        assert attributor.attribute(SNAP).sources_ok["kube_api"] is False
    finally:
        attributor.close()


def test_pod_uid_label_only_when_asked(tmp_path: Path, api: FakeApiServer, token: Path) -> None:
    for flag in (True, False):
        attributor = _attributor(
            tmp_path / str(flag), api, token, Telemetry(), pod_requests=True, pod_uid=flag
        )
        try:
            attributor.refresh_now()
            pods = attributor.attribute(SNAP).pods
        finally:
            attributor.close()
        uids = {p.container.pod: dict(p.container.labels).get("pod_uid") for p in pods}
        if flag:
            assert uids == {
                "infer-0": pod_uid(1),
                "tke-0": pod_uid(2),
                "train-0": pod_uid(3),
                "cpu-0": pod_uid(4),
            }
        else:
            assert set(uids.values()) == {None}


ALICE_UID = "313a5d97-3ee5-d4d6-5870-143f1939d837"


def _run_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], settings: str
) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    from falcon_gpu import cli
    from tests.agent.test_cli_e2e import parse_prom

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'node = "node-7"\nspool_dir = "{tmp_path / "spool"}"\n{settings}')
    capsys.readouterr()
    assert cli.main(["run", "--simulate", "shared-gpu", "--once", "--config", str(cfg)]) == 0
    return parse_prom(capsys.readouterr().out)


def by_pod(series: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str) -> dict[str, float]:
    return {dict(lb)["pod"] + "/" + dict(lb)["container"]: v for (n, lb), v in series.items() if n == name}


def test_run_once_on_the_shared_gpu_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI end to end: the simulator's GPUs and host tree, and its loopback API server listing
    the scenario's ``api_pods`` (HAMi quotas, a time-sliced replica, whole GPUs, gpucores 0)."""
    out = _run_once(tmp_path, capsys, "pod_requests = true\npod_uid = true\n")
    assert by_pod(out, "falcon_gpu_pod_requested_memory_bytes") == {
        "jupyter-alice/notebook": 8192 * MIB,  # HAMi gpumem 8192
        "dashboard-render-6f7c9/render": 4096 * MIB,  # gpumem 4096 with gpucores 0
    }
    assert by_pod(out, "falcon_gpu_pod_requested_compute_ratio") == {
        "jupyter-alice/notebook": 0.5,  # gpucores 50
        "jupyter-bob/notebook": 1.0,  # a time-sliced nvidia.com/gpu.shared replica
        "pipeline-0/preprocess": 1.0,  # whole GPUs
        "pipeline-0/train": 1.0,
        "idle-reservation-0/sleeper": 1.0,
    }  # dashboard-render's gpucores 0 reserved no compute: no ratio, so no +Inf downstream
    used = by_pod(out, "falcon_gpu_pod_memory_used_bytes")
    sm = by_pod(out, "falcon_gpu_pod_utilization_ratio")
    assert used["jupyter-alice/notebook"] / (8192 * MIB) == 0.5  # the scenario's 4 GiB of the 8 GiB given
    assert sm["jupyter-alice/notebook"] / 0.5 == pytest.approx(0.6)  # 30 % SM of the 50 % given
    assert used["dashboard-render-6f7c9/render"] / (4096 * MIB) == 0.5  # 2 GiB of 4 GiB
    labels = {
        dict(lb)["pod"]: dict(lb)
        for (n, lb), _ in out.items()
        if n == "falcon_gpu_pod_requested_compute_ratio"
    }
    assert labels["jupyter-alice"]["pod_uid"] == ALICE_UID
    assert labels["jupyter-alice"]["uuid"] == "GPU-fe49fb4c-3d29-111a-1278-513e4ab0ce96"
    errors = {dict(lb)["kind"]: v for (n, lb), v in out.items() if n == "falcon_gpu_agent_errors_total"}
    assert errors.get("kube_api", 0) == 0


def test_without_pod_requests_the_simulated_api_server_is_not_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _run_once(tmp_path, capsys, "")
    assert by_pod(out, "falcon_gpu_pod_requested_compute_ratio") == {}
    assert "jupyter-alice/notebook" in by_pod(out, "falcon_gpu_pod_memory_used_bytes")
