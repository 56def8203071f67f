"""Pod labels from a loopback HTTP server that answers like the API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from falcon_gpu.attribution import AttributionSettings, Attributor
from falcon_gpu.attribution.kube_api import KubeApiConfig, KubeApiError, PodLabelSource, sanitise_label
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import Settings
from falcon_gpu.simulator.node.kube_api_server import KubeApiServer

from .helpers import HostTree, container_id, gpu, pod_uid, proc, snapshot, systemd_cgroup

TOKEN = "s3cr3t-token"


def pod_item(
    ns: str, name: str, uid: str, labels: dict[str, str], containers: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    item: dict[str, Any] = {"metadata": {"namespace": ns, "name": name, "uid": uid, "labels": labels}}
    if containers is not None:
        item["spec"] = {"containers": containers}
    return item


class FakeApiServer(KubeApiServer):
    """The simulator's loopback API server (its HTTP side), answering GET /api/v1/pods with the
    given pages of raw items, only with the right token and field selector; ``requests`` records
    each query, ``status`` makes it fail."""

    def __init__(self, pages: list[list[dict[str, Any]]] | None = None) -> None:
        super().__init__((), "node-7", TOKEN)
        self.requests: list[dict[str, list[str]]] = []
        self.status = 200
        self.pages = pages or [
            [pod_item("ml", "train-0", pod_uid(1), {"app.kubernetes.io/name": "trainer", "team": "a"})],
            [pod_item("ml", "idle-0", pod_uid(2), {"team": "b", "secret-ish": "x"})],
        ]
        self.start()

    def answer(self, path: str, authorization: str | None) -> tuple[int, dict[str, Any]]:
        url = urlparse(path)
        query = parse_qs(url.query)
        self.requests.append(query)
        if self.status != 200:
            return self.status, {"kind": "Status"}
        if authorization != f"Bearer {TOKEN}":
            return 401, {"kind": "Status"}
        if url.path != "/api/v1/pods" or not query.get("fieldSelector", [""])[0].startswith("spec.nodeName="):
            return 400, {"kind": "Status"}
        if query["fieldSelector"] != ["spec.nodeName=node-7"]:  # no pods on any other node
            return 200, {"kind": "PodList", "metadata": {}, "items": []}
        page = 1 if query.get("continue") == ["page2"] else 0
        meta = {"continue": "page2"} if page + 1 < len(self.pages) else {}
        return 200, {"kind": "PodList", "metadata": meta, "items": self.pages[page]}

    def close(self) -> None:
        self.stop()


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    server = FakeApiServer()
    yield server
    server.close()


@pytest.fixture
def token(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def test_sanitise() -> None:
    assert sanitise_label("app.kubernetes.io/name") == "label_app_kubernetes_io_name"
    assert sanitise_label("team") == "label_team"


def test_lists_only_this_node_and_keeps_only_allowed_labels(api: FakeApiServer, token: Path) -> None:
    source = PodLabelSource(KubeApiConfig(api.url, token, None), "node-7", ["app.kubernetes.io/name", "team"])
    labels = source.fetch()
    source.close()
    assert labels.by_uid == {
        pod_uid(1): (("label_app_kubernetes_io_name", "trainer"), ("label_team", "a")),
        pod_uid(2): (("label_team", "b"),),
    }
    assert labels.by_name[("ml", "idle-0")] == (("label_team", "b"),)
    assert len(api.requests) == 2  # paginated


def test_allow_list_entries_that_collide_keep_the_first(api: FakeApiServer, token: Path) -> None:
    """A duplicated label name would make Prometheus refuse the whole remote-write request."""
    allow = ["team", "app.kubernetes.io/name", "team", "app_kubernetes_io/name"]
    source = PodLabelSource(KubeApiConfig(api.url, token, None), "node-7", allow)
    labels = source.fetch()
    source.close()
    assert labels.by_uid[pod_uid(1)] == (("label_team", "a"), ("label_app_kubernetes_io_name", "trainer"))


def test_refusal_names_the_fix_and_hides_the_token(api: FakeApiServer, token: Path) -> None:
    api.status = 403
    source = PodLabelSource(KubeApiConfig(api.url, token, None), "node-7", ["team"])
    with pytest.raises(KubeApiError, match="get/list on pods") as err:
        source.fetch()
    assert TOKEN not in str(err.value)
    source.close()


def test_attributor_copies_labels_onto_pod_series(tmp_path: Path, api: FakeApiServer, token: Path) -> None:
    tree = HostTree(tmp_path)
    tree.process(10, systemd_cgroup(pod_uid(1), container_id(1)))
    tree.container("ml", "train-0", pod_uid(1), "main", container_id(1))
    settings = Settings(
        proc_root=tree.proc,
        log_root=tree.log,
        kubelet_socket=tmp_path / "none.sock",
        node="node-7",
        pod_labels=["team"],
    )
    telemetry = Telemetry()
    attributor = Attributor(
        AttributionSettings.of(settings, kube_api=KubeApiConfig(api.url, token, None)), telemetry
    )
    try:
        attributor.refresh_now()
        result = attributor.attribute(snapshot(gpu(0, (proc(10, 1, 0.2),))))
        assert [p.container.labels for p in result.pods] == [(("label_team", "a"),)]
        assert result.sources_ok["kube_api"] is True
        api.status = 500  # the API server fails: the last labels stay
        attributor.refresh_now()
        result = attributor.attribute(snapshot(gpu(0, (proc(10, 1, 0.2),))))
        assert [p.container.labels for p in result.pods] == [(("label_team", "a"),)]
        assert result.sources_ok["kube_api"] is False
        assert telemetry.view().errors_total["kube_api"] == 1
    finally:
        attributor.close()


def test_pod_labels_outside_a_cluster_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    settings = Settings(
        proc_root=tmp_path,
        log_root=tmp_path,
        kubelet_socket=tmp_path / "none.sock",
        node="n",
        pod_labels=["a"],
    )
    telemetry = Telemetry()
    attributor = Attributor(AttributionSettings.of(settings), telemetry)
    try:
        attributor.refresh_now()
        assert attributor.attribute(snapshot(gpu(0))).sources_ok["kube_api"] is False
    finally:
        attributor.close()
    assert telemetry.is_failing("kube_api")


def test_doctor_flags_a_node_name_that_lists_no_pods(api: FakeApiServer, token: Path, tmp_path: Path) -> None:
    """node defaults to the host name; if that is not the Kubernetes node name, labels stay empty."""
    tree = HostTree(tmp_path)
    rows = {}
    for node in ("node-7", "host-7.example"):
        settings = Settings(
            proc_root=tree.proc,
            log_root=tree.log,
            kubelet_socket=tmp_path / "none.sock",
            node=node,
            pod_labels=["team"],
        )
        attributor = Attributor(
            AttributionSettings.of(settings, kube_api=KubeApiConfig(api.url, token, None)), Telemetry()
        )
        try:
            rows[node] = {r[0]: r for r in attributor.diagnose(snapshot(gpu(0)))}[
                "pod labels (Kubernetes API)"
            ]
        finally:
            attributor.close()
    assert rows["node-7"][1] == "OK" and "2 pods on node node-7" in rows["node-7"][2]
    assert rows["host-7.example"][1] == "FAIL" and "NODE_NAME" in rows["host-7.example"][2]
