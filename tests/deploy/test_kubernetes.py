"""conf/kubernetes: every overlay renders, every object validates, and the agent gets what it needs.

Rendering uses ``kubectl kustomize`` (skipped, with the reason, where kubectl is missing); objects of
the Kubernetes API are checked against its OpenAPI schemas by ``kubernetes-validate`` (strict:
an unknown field fails); the ServiceMonitor is a Prometheus Operator CRD, so its shape is
checked here against the Service it selects.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.agent.commands import FLUSH_TIMEOUT
from falcon_gpu.agent.loop import STUCK_AFTER_S
from falcon_gpu.settings import Settings, load_settings, split_listen

yaml = pytest.importorskip("yaml")
kv = pytest.importorskip("kubernetes_validate")

KUSTOMIZE = Path(__file__).resolve().parents[2] / "conf" / "kubernetes"
OVERLAYS = {
    "remote-write": "remote_write",
    "falcon-agent": "falcon_agent",
    "pushgateway": "pushgateway",
    "scrape": None,
    "pod-labels": "remote_write",
}
K8S_VERSIONS = ("1.29.0", "1.33.0")


@cache
def kubectl_or_reason() -> tuple[str | None, str]:
    """kubectl with a kustomize new enough for components and ``labels`` (kubectl >= 1.27)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return (
            None,
            "kubectl is not installed (Debian's kubernetes-client 1.20 is too old: install kubectl >= 1.27)",
        )
    out = subprocess.run([kubectl, "version", "--client", "-o", "json"], capture_output=True, text=True)
    try:
        minor = int(re.sub(r"\D.*", "", json.loads(out.stdout)["clientVersion"]["minor"]))
    except (ValueError, KeyError):
        return None, f"cannot tell kubectl's version: {out.stdout[:100]!r} {out.stderr[:100]!r}"
    return (kubectl, "") if minor >= 27 else (None, f"kubectl 1.{minor} is older than 1.27")


def kustomize(directory: Path) -> list[dict[str, Any]]:
    kubectl, reason = kubectl_or_reason()
    if kubectl is None:
        pytest.skip(reason)
    done = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@cache
def rendered(overlay: str) -> tuple[dict[str, Any], ...]:
    return tuple(kustomize(KUSTOMIZE / "overlays" / overlay))


def one(docs: tuple[dict[str, Any], ...] | list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def pod_spec(docs: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    return dict(one(docs, "DaemonSet")["spec"]["template"]["spec"])


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_every_rendered_object_validates(overlay: str) -> None:
    docs = rendered(overlay)
    assert {"Namespace", "ServiceAccount", "ConfigMap", "DaemonSet"} <= {d["kind"] for d in docs}
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: test_scrape_overlay_service_and_servicemonitor
        for version in K8S_VERSIONS:
            kv.validate(doc, version, strict=True)


def test_validation_would_catch_a_bad_field() -> None:
    daemonset = dict(one(rendered("remote-write"), "DaemonSet"))
    daemonset["spec"] = {**daemonset["spec"], "hostPid": True}  # a typo of hostPID
    with pytest.raises(kv.ValidationError):
        kv.validate(daemonset, K8S_VERSIONS[0], strict=True)


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_attribution_and_delivery_get_what_they_need(overlay: str) -> None:
    docs = rendered(overlay)
    spec = pod_spec(docs)
    defaults = Settings(node="n")
    assert spec["hostPID"] is True  # NVML's host PIDs must exist in our /proc
    # hostPID and hostPath are outside Pod Security "baseline": the namespace must allow them
    assert one(docs, "Namespace")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert spec["enableServiceLinks"] is False  # no stray FALCON_GPU_* variables from Services
    assert spec["terminationGracePeriodSeconds"] >= FLUSH_TIMEOUT + STUCK_AFTER_S
    (container,) = spec["containers"]
    env = env_of(container)
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    for path in (
        defaults.kubelet_socket.parent,
        defaults.log_root / "pods",
        defaults.log_root / "containers",
    ):
        mount = mounts[str(path)]
        assert mount.get("readOnly") is True, path
        assert volumes[mount["name"]]["hostPath"]["path"] == str(path)  # same path inside and out
    spool = mounts[str(defaults.spool_dir.parent)]
    assert not spool.get("readOnly") and volumes[spool["name"]]["hostPath"]["path"] == "/var/lib/falcon-gpu"
    # the probes hit the port the agent listens on
    _, port = split_listen(env["FALCON_GPU_LISTEN"])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == port
    host, _ = split_listen(env["FALCON_GPU_LISTEN"])
    scheme = "HTTPS" if "FALCON_GPU_WEB_CONFIG_FILE" in env else "HTTP"
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = dict(container[probe]["httpGet"])
        assert get.pop("scheme", "HTTP") == scheme and get.pop("host", host) == host  # where it listens
        assert get == {"path": path, "port": "metrics"}
    assert container["resources"]["requests"]["memory"] and container["resources"]["limits"]["memory"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_the_configmap_is_a_valid_configuration_with_the_overlays_sink(overlay: str, tmp_path: Path) -> None:
    docs = rendered(overlay)
    configmap = one(docs, "ConfigMap")
    volume = next(v for v in pod_spec(docs)["volumes"] if "configMap" in v)
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]  # the hashed name is wired
    config = tmp_path / "falcon-gpu.toml"
    config.write_text(configmap["data"]["falcon-gpu.toml"])
    settings = load_settings(config)
    assert [s.type for s in settings.sinks] == ([OVERLAYS[overlay]] if OVERLAYS[overlay] else [])
    assert settings.gpu_resources == ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*"]
    assert settings.kubernetes == "on"  # a missing mount is a warning, and a FAIL in doctor


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_only_pod_labels_grants_read_only_rbac(overlay: str) -> None:
    docs = rendered(overlay)
    rbac = [d for d in docs if d["apiVersion"].startswith("rbac.authorization.k8s.io/")]
    spec = pod_spec(docs)
    if overlay != "pod-labels":
        assert rbac == [] and spec["automountServiceAccountToken"] is False
        return
    assert spec["automountServiceAccountToken"] is True
    (rule,) = one(docs, "ClusterRole")["rules"]
    assert rule == {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    binding = one(docs, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "falcon-gpu", "namespace": "falcon-gpu"}
    ]
    assert binding["roleRef"]["name"] == one(docs, "ClusterRole")["metadata"]["name"]


def test_falcon_agent_overlay_shares_the_node_network() -> None:
    spec = pod_spec(rendered("falcon-agent"))
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    for other in set(OVERLAYS) - {"falcon-agent"}:
        assert "hostNetwork" not in pod_spec(rendered(other)), other


def test_scrape_overlay_service_and_servicemonitor() -> None:
    docs = rendered("scrape")
    service, monitor = one(docs, "Service"), one(docs, "ServiceMonitor")
    pod_labels = one(docs, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "metrics"
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    mspec = monitor["spec"]
    assert mspec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert mspec["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    (endpoint,) = mspec["endpoints"]
    assert endpoint["port"] == port["name"] and endpoint["path"] == "/metrics"
    assert endpoint["honorLabels"] is True
    # the agent pod's own labels must not land on device series
    (drop,) = endpoint["relabelings"]
    assert drop["action"] == "labeldrop" and "pod" in drop["regex"] and "namespace" in drop["regex"]
    assert set(mspec) <= {"selector", "namespaceSelector", "endpoints", "jobLabel", "targetLabels"}


def test_runtime_class_component(tmp_path: Path) -> None:
    target = os.path.relpath(KUSTOMIZE / "overlays" / "remote-write", tmp_path)
    component = os.path.relpath(KUSTOMIZE / "components" / "nvidia-runtime-class", tmp_path)
    (tmp_path / "kustomization.yaml").write_text(f"resources:\n  - {target}\ncomponents:\n  - {component}\n")
    docs = kustomize(tmp_path)
    assert pod_spec(tuple(docs))["runtimeClassName"] == "nvidia"
    kv.validate(one(docs, "DaemonSet"), K8S_VERSIONS[0], strict=True)
    assert "runtimeClassName" not in pod_spec(rendered("remote-write"))


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_no_node_ip_serves_metrics_without_authentication(overlay: str) -> None:
    """Issue 19.4: with hostNetwork, /metrics on 0.0.0.0 answered on every node IP to anyone."""
    spec = pod_spec(rendered(overlay))
    env = env_of(spec["containers"][0])
    host, _ = split_listen(env["FALCON_GPU_LISTEN"])
    if spec.get("hostNetwork"):
        assert host == "127.0.0.1" or "FALCON_GPU_WEB_CONFIG_FILE" in env, overlay


def test_scrape_overlay_serves_tls_and_basic_auth_from_secrets(tmp_path: Path) -> None:
    from falcon_gpu.listen.basic_auth import BasicAuth
    from falcon_gpu.listen.web_config import load_web_config
    from tests.listen.certs import make_certs

    docs = rendered("scrape")
    spec = pod_spec(docs)
    (container,) = spec["containers"]
    web_config = Path(env_of(container)["FALCON_GPU_WEB_CONFIG_FILE"])
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == str(web_config.parent)]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    files = {
        i["path"]: s["secret"]["name"] for s in volume["projected"]["sources"] for i in s["secret"]["items"]
    }
    assert files == {"tls.crt": "falcon-gpu-tls", "tls.key": "falcon-gpu-tls",
                     "web-config.yml": "falcon-gpu-web-config"}  # fmt: skip
    (endpoint,) = one(docs, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"]["ca"] == {"secret": {"name": "falcon-gpu-tls", "key": "ca.crt"}}
    assert set(endpoint["basicAuth"]) == {"username", "password"}
    # the shipped web-config.yml loads beside a certificate, and its placeholder lets nobody in
    certs = make_certs(tmp_path)
    (tmp_path / "tls.crt").write_bytes(certs.server_cert.read_bytes())
    (tmp_path / "tls.key").write_bytes(certs.server_key.read_bytes())
    shipped = KUSTOMIZE / "overlays" / "scrape" / web_config.name
    (tmp_path / web_config.name).write_text(shipped.read_text())
    config = load_web_config(tmp_path / web_config.name)
    assert config.tls is not None and set(config.users) == {"prometheus"}
    assert not BasicAuth().allows(config.users, "Basic cHJvbWV0aGV1czpwcm9tZXRoZXVz")  # prometheus:prometheus
