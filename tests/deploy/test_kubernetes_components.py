"""conf/kubernetes as kube-prometheus-stack users expect: taints, components, `release`, a remote base.

Every overlay is rendered with every component (``kubectl kustomize``, skipped with the reason
where kubectl is missing) and each Kubernetes object is validated against the API's schemas; the
Prometheus Operator's objects (CRDs) are checked here for their shape, and the PrometheusRule's
groups against conf/prometheus and promtool.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import tomllib

import falcon_gpu
from tests.delivery.conftest import need
from tests.deploy.generated import assert_generated_files_current
from tests.deploy.live import RULE_FILES
from tests.deploy.test_kubernetes import K8S_VERSIONS, KUSTOMIZE, OVERLAYS, kustomize, one, pod_spec, rendered

yaml = pytest.importorskip("yaml")
kv = pytest.importorskip("kubernetes_validate")

ROOT = KUSTOMIZE.parents[1]
COMPONENTS = sorted(p.name for p in (KUSTOMIZE / "components").iterdir() if p.is_dir())
MONITORING = "monitoring.coreos.com/v1"
RULE_KEYS = {"record", "alert", "expr", "for", "keep_firing_for", "labels", "annotations"}
REMOTE = re.compile(r"https://github\.com/<org>/falcon-gpu//(conf/kubernetes/overlays/[\w-]+)\?ref=(v[\w.]+)")


def with_components(tmp: Path, overlay: Path, *components: str) -> list[dict[str, Any]]:
    """Render ``overlay`` with ``components`` the way a user's own kustomization adds them."""
    lines = ["resources:", f"  - {os.path.relpath(overlay, tmp)}", "components:"]
    lines += [f"  - {os.path.relpath(KUSTOMIZE / 'components' / c, tmp)}" for c in components]
    (tmp / "kustomization.yaml").write_text("\n".join(lines) + "\n")
    return kustomize(tmp)


def check_monitoring_object(doc: dict[str, Any]) -> None:
    """The shape the Prometheus Operator's CRDs accept, for the kinds conf/kubernetes ships."""
    assert doc["metadata"]["namespace"] == "falcon-gpu"
    if doc["kind"] == "PrometheusRule":
        assert set(doc["spec"]) == {"groups"}
        for group in doc["spec"]["groups"]:
            assert set(group) <= {"name", "interval", "rules", "limit"} and group["rules"]
            for rule in group["rules"]:
                assert set(rule) <= RULE_KEYS and ("record" in rule) != ("alert" in rule), rule
    else:
        assert doc["kind"] in {"ServiceMonitor", "PodMonitor"}, doc["kind"]


def release_label() -> str:
    component = yaml.safe_load(
        (KUSTOMIZE / "components" / "kube-prometheus-stack" / "kustomization.yaml").read_text()
    )
    (entry,) = component["labels"]
    return str(entry["pairs"]["release"])


def package_version() -> str:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version == falcon_gpu.__version__  # one version for the wheel, --version and the image
    return str(version)


# -- taints and node selection -----------------------------------------------------------------


def tolerated(tolerations: list[dict[str, Any]], taint: dict[str, str]) -> bool:
    """Kubernetes' rule (k8s.io/api core/v1 Toleration.ToleratesTaint)."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("key") and t["key"] != taint["key"]:
            continue
        if t.get("operator", "Equal") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute", "PreferNoSchedule"])
def test_the_agent_runs_on_gpu_nodes_tainted_with_any_effect(overlay: str, effect: str) -> None:
    """GPU nodes are tainted nvidia.com/gpu (value present/true, NoSchedule or NoExecute): an
    exporter that does not tolerate it gets zero pods there (dcgm-exporter's chart did)."""
    spec = pod_spec(rendered(overlay))
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}  # GPU Feature Discovery's label
    for value in ("present", "true", ""):
        taint = {"key": "nvidia.com/gpu", "value": value, "effect": effect}
        assert tolerated(spec["tolerations"], taint), taint
    assert not tolerated(spec["tolerations"], {"key": "dedicated", "value": "db", "effect": effect})


# -- every overlay with every component --------------------------------------------------------


def test_the_components_are_the_ones_documented() -> None:
    assert COMPONENTS == [
        "grafana-sidecar",
        "kube-prometheus-stack",
        "nvidia-runtime-class",
        "prometheus-operator",
    ]


@pytest.mark.parametrize("component", [*COMPONENTS, "all"])
@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_every_overlay_builds_and_validates_with_each_component(
    overlay: str, component: str, tmp_path: Path
) -> None:
    docs = with_components(
        tmp_path, KUSTOMIZE / "overlays" / overlay, *(COMPONENTS if component == "all" else [component])
    )
    assert {d["kind"] for d in rendered(overlay)} <= {d["kind"] for d in docs}
    for doc in docs:
        if doc in rendered(overlay):
            continue  # unchanged by the component: validated by test_kubernetes.py
        if doc["apiVersion"] == MONITORING:
            check_monitoring_object(doc)
            continue
        assert not doc["apiVersion"].startswith("monitoring.coreos.com/"), doc["apiVersion"]
        for version in K8S_VERSIONS:
            kv.validate(doc, version, strict=True)
    kinds = [d["kind"] for d in docs]
    if component in {"prometheus-operator", "all"}:
        assert kinds.count("PrometheusRule") == 1
    if component in {"grafana-sidecar", "all"}:
        assert kinds.count("ConfigMap") == 1 + len(list((ROOT / "conf" / "grafana").glob("*.json")))


# -- prometheus-operator: the rules of conf/prometheus as a PrometheusRule --------------------


def test_committed_prometheusrule_is_what_the_generator_writes() -> None:
    assert_generated_files_current("gen_prometheusrule.py")


def test_prometheusrule_holds_conf_prometheus_rules_and_promtool_accepts_them(tmp_path: Path) -> None:
    docs = with_components(tmp_path, KUSTOMIZE / "overlays" / "remote-write", "prometheus-operator")
    rule = one(docs, "PrometheusRule")
    wanted = [
        group
        for name in RULE_FILES
        for group in yaml.safe_load((ROOT / "conf" / "prometheus" / name).read_text())["groups"]
    ]
    assert rule["spec"]["groups"] == wanted
    extracted = tmp_path / "extracted.yml"
    extracted.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    answer = subprocess.run(
        [need("promtool"), "check", "rules", str(extracted)], capture_output=True, text=True, timeout=120
    )
    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in wanted)} rules found" in answer.stdout


# -- kube-prometheus-stack's selectors: the release label, from one place ----------------------


def test_every_operator_object_carries_the_release_label(tmp_path: Path) -> None:
    """kube-prometheus-stack's Prometheus selects ServiceMonitors and PrometheusRules by `release`."""
    docs = with_components(tmp_path, KUSTOMIZE / "overlays" / "scrape", "prometheus-operator")
    monitoring = [d for d in docs if d["apiVersion"] == MONITORING]
    assert sorted(d["kind"] for d in monitoring) == ["PrometheusRule", "ServiceMonitor"]
    for doc in monitoring:
        assert doc["metadata"]["labels"]["release"] == release_label() == "kube-prometheus-stack"
    # the scrape overlay alone: its ServiceMonitor is selected too
    assert one(rendered("scrape"), "ServiceMonitor")["metadata"]["labels"]["release"] == release_label()
    # and the label stays off the agent's own objects
    assert all(
        "release" not in d["metadata"].get("labels", {}) for d in docs if d["apiVersion"] != MONITORING
    )


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_every_overlay_labels_its_operator_objects_for_kube_prometheus_stack(overlay: str) -> None:
    """An overlay that ships a ServiceMonitor or PodMonitor includes components/kube-prometheus-stack."""
    for doc in rendered(overlay):
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            assert doc["metadata"]["labels"].get("release") == release_label(), (overlay, doc["kind"])


def test_the_release_label_is_set_in_one_place(tmp_path: Path) -> None:
    """A user whose Helm release is `monitoring` edits one line, and every selector follows."""
    setters = [
        p.relative_to(KUSTOMIZE)
        for p in KUSTOMIZE.rglob("*.yaml")
        if re.search(r"^\s*release:", p.read_text(), re.MULTILINE)
    ]
    assert [str(p) for p in setters] == ["components/kube-prometheus-stack/kustomization.yaml"]
    copy = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", copy)
    component = copy / "kubernetes" / "components" / "kube-prometheus-stack" / "kustomization.yaml"
    component.write_text(
        component.read_text().replace("release: kube-prometheus-stack", "release: monitoring")
    )
    user = tmp_path / "user"
    user.mkdir()
    lines = ["resources:", "  - ../conf/kubernetes/overlays/scrape", "components:"]
    (user / "kustomization.yaml").write_text(
        "\n".join([*lines, "  - ../conf/kubernetes/components/prometheus-operator\n"])
    )
    labels = {d["kind"]: d["metadata"]["labels"].get("release") for d in kustomize(user)}
    assert labels["ServiceMonitor"] == labels["PrometheusRule"] == "monitoring"


def test_a_remote_base_user_overrides_the_release_label_in_their_kustomization(tmp_path: Path) -> None:
    target = os.path.relpath(KUSTOMIZE / "overlays" / "scrape", tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        f"resources:\n  - {target}\nlabels:\n  - pairs: {{release: monitoring}}\n"
    )
    monitor = one(kustomize(tmp_path), "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "monitoring"


# -- grafana-sidecar: the dashboards as labelled ConfigMaps ------------------------------------


def test_dashboard_configmaps_hold_the_dashboards_byte_for_byte(tmp_path: Path) -> None:
    docs = with_components(tmp_path, KUSTOMIZE / "overlays" / "remote-write", "grafana-sidecar")
    boards = {
        key: (cm["metadata"], value)
        for cm in docs
        if cm["kind"] == "ConfigMap" and cm["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
        for key, value in cm["data"].items()
    }
    files = sorted((ROOT / "conf" / "grafana").glob("*.json"))
    assert sorted(boards) == [p.name for p in files]  # a new dashboard needs its line in the kustomization
    for path in files:
        meta, text = boards[path.name]
        assert text.encode() == path.read_bytes(), path.name
        # a fixed name: a hashed one would leave the old copy (same uid) behind on every change
        assert meta["name"] == f"falcon-gpu-dashboard-{path.stem}" and meta["namespace"] == "falcon-gpu"
        # `kubectl apply` (client side) keeps the whole object in an annotation limited to 256 KiB
        assert len(text.encode()) < 200 * 1024, path.name


# -- a remote base, pinned to its version's image ---------------------------------------------


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_every_overlay_runs_the_image_of_the_package_version(overlay: str) -> None:
    (container,) = pod_spec(rendered(overlay))["containers"]
    _, tag = container["image"].rsplit(":", 1)
    assert tag == package_version()  # the name is the user's registry; the tag is the release's


def test_documented_remote_bases_name_the_package_version() -> None:
    found = [
        (path.relative_to(ROOT), match)
        for path in [ROOT / "README.md", *KUSTOMIZE.rglob("kustomization.yaml")]
        for match in REMOTE.finditer(path.read_text())
    ]
    assert any(str(p).startswith("conf/kubernetes/overlays/remote-write") for p, _ in found), found
    for path, match in found:
        assert match.group(2) == f"v{package_version()}", path
        assert (ROOT / match.group(1) / "kustomization.yaml").exists(), path


def test_the_remote_base_builds_from_a_git_tag(tmp_path: Path) -> None:
    """The documented URL, with the repository served from a local clone tagged v<version>."""
    git = need("git")
    repo = tmp_path / "falcon-gpu"
    shutil.copytree(ROOT / "conf", repo / "conf")
    ident = ["-c", "user.name=test", "-c", "user.email=test@localhost"]
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        [*ident, "commit", "-qm", "release"],
        ["tag", f"v{package_version()}"],
    ):
        subprocess.run([git, *args], cwd=repo, check=True, capture_output=True, timeout=60)
    text = (KUSTOMIZE / "overlays" / "remote-write" / "kustomization.yaml").read_text()
    match = REMOTE.search(text)
    assert match is not None
    url = match.group(0).replace("https://github.com/<org>/falcon-gpu", f"file://{repo}")
    user = tmp_path / "user"
    user.mkdir()
    (user / "kustomization.yaml").write_text(
        f"resources:\n  - {url}\n"
        "images:\n  - name: falcon-gpu\n    newName: registry.example.com/falcon-gpu\n"
    )
    (container,) = pod_spec(tuple(kustomize(user)))["containers"]
    assert (
        container["image"] == f"registry.example.com/falcon-gpu:{package_version()}"
    )  # the tag stays pinned
