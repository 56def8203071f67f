"""What survives a restart: the controller, else the pod name without its generated suffix."""

from __future__ import annotations

import pytest

from falcon_gpu.advice.workload import controller, from_pod_name, workload_of


@pytest.mark.parametrize(
    ("pod", "workload"),
    [
        ("web-7d4f8b9c5-x2k9z", "web"),  # Deployment: ReplicaSet hash + random suffix
        ("nightly-28912345-b7q4m", "nightly-28912345"),  # a CronJob's Job: digits are no hash
        ("train-job-q5w2x", "train-job"),  # Job / DaemonSet / generateName
        ("db-0", "db"),  # StatefulSet ordinal
        ("db-12", "db"),
        ("db-admin", "db-admin"),  # vowels: a word, not a generated suffix
        ("solo", "solo"),
    ],
)
def test_pod_name_rules(pod: str, workload: str) -> None:
    assert from_pod_name(pod) == workload


def test_controller_from_owner_references() -> None:
    rs = {"ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d4f8b9c5", "controller": True}],
          "labels": {"pod-template-hash": "7d4f8b9c5"}}  # fmt: skip
    assert controller(rs) == "web"
    no_label = {"ownerReferences": [{"kind": "ReplicaSet", "name": "api-5f6c7d8b9", "controller": True}]}
    assert controller(no_label) == "api"
    job = {"ownerReferences": [{"kind": "Job", "name": "train-a", "controller": True}]}
    assert controller(job) == "train-a"
    not_controller = {"ownerReferences": [{"kind": "ConfigMap", "name": "x"}]}
    assert controller(not_controller) is None
    assert controller({}) is None


def test_workload_of_prefers_the_owner_then_the_pod_then_the_container() -> None:
    assert workload_of("trainer-a", "main", "trainer") == "trainer"
    assert workload_of("web-7d4f8b9c5-x2k9z", "main") == "web"
    assert workload_of("", "jupyter") == "jupyter"
