"""The simulator's loopback API server: it answers the pod list the way kube-apiserver does, and
the agent's real client reads the scenario's labels and GPU quotas from it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from falcon_gpu.attribution import AttributionSettings, Attributor
from falcon_gpu.attribution.kube_api import KubeApiConfig, KubeApiError, PodLabelSource
from falcon_gpu.attribution.pod_requests import MIB, Requested
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import Settings
from falcon_gpu.simulator.node.layout import HostPaths, SimulatedHost
from falcon_gpu.simulator.scenario.host_model import HostScenario
from falcon_gpu.simulator.scenario.parse import load_scenario, resolve_scenario
from falcon_gpu.simulator.scenario.strict_json import ScenarioError
from falcon_gpu.sources.nvml.library import load_nvml
from falcon_gpu.sources.nvml.source import NvmlSource

NODE = "node-7"


@pytest.fixture(scope="module")
def shared_gpu() -> HostScenario:
    host = load_scenario(resolve_scenario("shared-gpu")).host
    assert host is not None
    return host


@pytest.fixture
def host(shared_gpu: HostScenario) -> Iterator[tuple[SimulatedHost, HostPaths]]:
    simulated = SimulatedHost(shared_gpu, node=NODE)
    paths = simulated.start()
    yield simulated, paths
    simulated.stop()


def get(paths: HostPaths, query: str, token: str | None = "file") -> tuple[int, dict[str, Any]]:
    assert paths.kube_api is not None and paths.kube_api.token_file is not None
    headers = {}
    if token is not None:
        secret = paths.kube_api.token_file.read_text().strip() if token == "file" else token
        headers["Authorization"] = f"Bearer {secret}"
    request = urllib.request.Request(paths.kube_api.url + query, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_it_lists_this_nodes_pods_like_the_api_server(host: tuple[SimulatedHost, HostPaths]) -> None:
    _, paths = host
    assert paths.kube_api is not None and paths.kube_api.url.startswith("http://127.0.0.1:")
    code, body = get(paths, f"/api/v1/pods?fieldSelector=spec.nodeName%3D{NODE}")
    assert code == 200 and body["kind"] == "PodList"
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in body["items"]][:2] == [
        ("team-a", "jupyter-alice"),
        ("team-a", "jupyter-bob"),
    ]
    alice = body["items"][0]
    assert alice["metadata"]["uid"] == "313a5d97-3ee5-d4d6-5870-143f1939d837"
    assert alice["spec"]["nodeName"] == NODE
    assert alice["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] == "8192"
    assert "continue" not in body["metadata"]


def test_it_pages_refuses_and_filters(host: tuple[SimulatedHost, HostPaths]) -> None:
    simulated, paths = host
    names: list[str] = []
    query = f"/api/v1/pods?fieldSelector=spec.nodeName%3D{NODE}&limit=4"
    code, body = get(paths, query)
    names += [i["metadata"]["name"] for i in body["items"]]
    assert code == 200 and len(body["items"]) == 4 and body["metadata"]["remainingItemCount"] == 2
    code, body = get(paths, query + "&continue=" + body["metadata"]["continue"])
    names += [i["metadata"]["name"] for i in body["items"]]
    assert code == 200 and "continue" not in body["metadata"]
    assert len(names) == len(set(names)) == 6

    assert get(paths, "/api/v1/pods?fieldSelector=spec.nodeName%3Dother-node")[1]["items"] == []
    assert get(paths, "/api/v1/pods", token=None)[0] == 401
    assert get(paths, "/api/v1/pods", token="guessed")[1]["reason"] == "Unauthorized"
    assert get(paths, "/api/v1/pods?fieldSelector=status.phase%3DRunning")[0] == 400
    assert get(paths, "/api/v1/pods?continue=bogus")[0] == 400
    assert get(paths, "/api/v1/nodes")[0] == 404
    assert simulated.kube_api_server is not None
    simulated.kube_api_server.fail_with = 503
    assert get(paths, "/api/v1/pods")[0] == 503


def test_the_agents_client_reads_the_scenarios_quotas(host: tuple[SimulatedHost, HostPaths]) -> None:
    _, paths = host
    assert paths.kube_api is not None
    client = PodLabelSource(paths.kube_api, NODE, ["team"], quotas=True)
    try:
        found = client.fetch()
        assert found.by_name[("team-b", "dashboard-render-6f7c9")] == (("label_team", "b"),)
        assert found.requested == {
            ("team-a", "jupyter-alice", "notebook"): Requested(8192 * MIB, 0.5),
            ("team-a", "jupyter-bob", "notebook"): Requested(None, 1.0),
            ("team-b", "dashboard-render-6f7c9", "render"): Requested(4096 * MIB, None),
            ("ml", "pipeline-0", "preprocess"): Requested(None, 1.0),
            ("ml", "pipeline-0", "train"): Requested(None, 1.0),
            ("ml", "idle-reservation-0", "sleeper"): Requested(None, 1.0),
        }
        wrong = PodLabelSource(KubeApiConfig(paths.kube_api.url, None, None), NODE, [], quotas=True)
        with pytest.raises(KubeApiError, match="401"):
            wrong.fetch()  # no token: refused, as by the real server
        wrong.close()
    finally:
        client.close()


def test_no_api_pods_no_api_server() -> None:
    host = load_scenario(resolve_scenario("mig-node")).host
    assert host is not None and host.api_pods == ()
    simulated = SimulatedHost(host)
    try:
        assert simulated.start().kube_api is None
    finally:
        simulated.stop()


def test_a_bad_api_pod_names_its_path(tmp_path: Any) -> None:
    scenario = json.loads(resolve_scenario("shared-gpu").read_text())
    scenario["host"]["api_pods"][0]["containers"][0]["limits"]["nvidia.com/gpumem"] = 8192
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(scenario))
    with pytest.raises(
        ScenarioError, match=r"host\.api_pods\[0\]\.containers\[0\]\.limits\.nvidia\.com/gpumem"
    ):
        load_scenario(path)


def test_a_host_that_cannot_start_stops_what_it_started(
    shared_gpu: HostScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    from falcon_gpu.simulator.node import kube_api_server

    def refuse(self: kube_api_server.KubeApiServer) -> str:
        raise OSError("address in use")

    monkeypatch.setattr(kube_api_server.KubeApiServer, "start", refuse)
    simulated = SimulatedHost(shared_gpu, node=NODE)
    with pytest.raises(OSError, match="address in use"):
        simulated.start()
    assert simulated.server is None and simulated.paths is None  # the gRPC server was stopped again


def test_a_failing_api_server_is_counted_and_the_other_sources_go_on(
    host: tuple[SimulatedHost, HostPaths],
) -> None:
    simulated, paths = host
    settings = Settings(
        node=NODE, proc_root=paths.proc_root, log_root=paths.log_root, kubelet_socket=paths.kubelet_socket,
        pod_requests=True,
    )  # fmt: skip
    telemetry = Telemetry()
    attributor = Attributor(AttributionSettings.of(settings, kube_api=paths.kube_api), telemetry)
    source = NvmlSource(load_nvml(load_scenario(resolve_scenario("shared-gpu"))), telemetry)
    try:
        attributor.refresh_now()
        snapshot = source.collect(0.0)
        quotas = {
            p.container.pod: p.container.requested_compute_ratio for p in attributor.attribute(snapshot).pods
        }
        assert quotas["jupyter-alice"] == 0.5
        assert simulated.kube_api_server is not None
        simulated.kube_api_server.fail_with = 500
        attributor.refresh_now()
        result = attributor.attribute(snapshot)
    finally:
        attributor.close()
        source.close()
    assert telemetry.view().errors_total.get("kube_api") == 1
    assert result.sources_ok["kube_api"] is False and result.sources_ok["kubelet"] is True
    assert {p.container.pod: p.container.requested_compute_ratio for p in result.pods} == quotas  # kept
    assert {p.container.pod for p in result.pods if p.allocated} >= {"jupyter-alice", "pipeline-0"}  # kubelet
