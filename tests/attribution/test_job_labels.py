"""``job_labels``: a pod's distributed job as ``job_name``, with no ``pod_labels`` entry.

Through the attributor and a loopback server that answers like the API server (test_kube_api.py's),
so the label travels the way production reads it: the pod list, the source, the chain, the joiner.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec.structs import replace

from falcon_gpu.attribution import AttributionSettings, Attributor, presence
from falcon_gpu.attribution.kube_api import KubeApiConfig
from falcon_gpu.model.attribution import Attribution
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import Settings

from .helpers import HostTree, container_id, gpu, pod_uid, proc, snapshot, systemd_cgroup
from .test_kube_api import TOKEN, FakeApiServer, pod_item

KUBEFLOW = "training.kubeflow.org/job-name"
JOB = "batch.kubernetes.io/job-name"


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN)
    return path


def attribute(tmp_path: Path, kube_api: KubeApiConfig | None, **settings: object) -> Attribution:
    tree = HostTree(tmp_path)
    tree.process(10, systemd_cgroup(pod_uid(1), container_id(1)))
    tree.container("ml", "train-0", pod_uid(1), "main", container_id(1))
    where = {"proc_root": tree.proc, "log_root": tree.log, "kubelet_socket": tmp_path / "none.sock"}
    agent = Settings(node="node-7", **where, **settings)
    attributor = Attributor(AttributionSettings.of(agent, kube_api=kube_api), Telemetry())
    try:
        attributor.refresh_now()
        return attributor.attribute(snapshot(gpu(0, (proc(10, 1, 0.9),))))
    finally:
        attributor.close()


def one_pod(labels: dict[str, str]) -> FakeApiServer:
    return FakeApiServer([[pod_item("ml", "train-0", pod_uid(1), labels)]])


def test_the_first_job_label_a_pod_has_is_its_job_name(tmp_path: Path, token_file: Path) -> None:
    """By default, with no pod_labels: Job's label wins over none, Kubeflow's (listed first) over Job's."""
    server = one_pod({JOB: "resnet-batch", KUBEFLOW: "resnet", "team": "a"})
    try:
        result = attribute(tmp_path, KubeApiConfig(server.url, token_file, None))
        assert [p.container.labels for p in result.pods] == [(("job_name", "resnet"),)]
        assert result.sources_ok["kube_api"] is True
        # the order of the setting decides; copied labels come after
        config = KubeApiConfig(server.url, token_file, None)
        result = attribute(tmp_path / "2", config, job_labels=[JOB, KUBEFLOW], pod_labels=["team"])
        want = (("job_name", "resnet-batch"), ("label_team", "a"))
        assert [p.container.labels for p in result.pods] == [want]
    finally:
        server.stop()


def test_a_pod_of_no_job_has_no_job_name(tmp_path: Path, token_file: Path) -> None:
    server = one_pod({"team": "a", JOB: ""})  # an empty value names no job
    try:
        result = attribute(tmp_path, KubeApiConfig(server.url, token_file, None))
        assert [p.container.labels for p in result.pods] == [()]
    finally:
        server.stop()


def test_job_labels_alone_ask_the_api_only_where_the_agent_has_access(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside a cluster, or in one without a mounted token (the base DaemonSet), the API server is
    never asked and nothing fails; with a token it is (pod_labels and pod_requests still insist)."""
    account = tmp_path / "serviceaccount"
    monkeypatch.setattr(presence, "SERVICE_ACCOUNT", account)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    base = AttributionSettings(node="n")
    assert base.job_labels and not presence.kube_api_wanted(base)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert not presence.kube_api_wanted(base)  # in a cluster, but no token mounted
    account.mkdir()
    (account / "token").write_text("t")
    assert presence.kube_api_wanted(base)
    assert not presence.kube_api_wanted(replace(base, job_labels=()))
    assert presence.kube_api_wanted(replace(base, job_labels=(), pod_requests=True))
    given = replace(base, kube_api=KubeApiConfig("http://127.0.0.1:1", None, None))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert presence.kube_api_wanted(given)  # an API server given to it (the simulator's)


def test_no_access_no_source_and_no_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    result = attribute(tmp_path, None)
    assert "kube_api" not in result.sources_ok
    assert [p.container.labels for p in result.pods] == [()]


def test_an_empty_job_label_name_is_refused() -> None:
    with pytest.raises(ValueError, match="job_labels"):
        Settings(node="n", job_labels=["volcano.sh/job-name", " "])
