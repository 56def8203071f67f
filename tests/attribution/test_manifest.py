"""The DaemonSet gives attribution what it needs, at the paths the settings default to.

Read straight from conf/kubernetes/base (no kubectl needed); tests/deploy/test_kubernetes.py checks
every rendered overlay as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.settings import Settings, load_settings

yaml = pytest.importorskip("yaml")

KUSTOMIZE = Path(__file__).resolve().parents[2] / "conf" / "kubernetes"
DAEMONSET = KUSTOMIZE / "base" / "daemonset.yaml"


def load(path: Path) -> dict[str, Any]:
    return {d["kind"]: d for d in yaml.safe_load_all(path.read_text())}


def test_daemonset_has_host_pids_and_read_only_mounts() -> None:
    spec = load(DAEMONSET)["DaemonSet"]["spec"]["template"]["spec"]
    assert spec["hostPID"] is True
    (container,) = spec["containers"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    defaults = Settings(node="n")
    needed = (defaults.kubelet_socket.parent, defaults.log_root / "pods", defaults.log_root / "containers")
    for path in needed:
        assert mounts[str(path)].get("readOnly") is True, path
    host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    for mount in container["volumeMounts"]:
        if mount["name"] in host_paths and mount.get("readOnly"):
            assert host_paths[mount["name"]] == mount["mountPath"]  # same path inside and out


@pytest.mark.parametrize("directory", ["base", "overlays/pod-labels"])
def test_configmap_is_a_valid_configuration(directory: str, tmp_path: Path) -> None:
    config = tmp_path / "falcon-gpu.toml"
    config.write_text((KUSTOMIZE / directory / "falcon-gpu.toml").read_text())
    settings = load_settings(config)
    assert settings.gpu_resources == ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*"]


def test_rbac_only_reads_pods() -> None:
    (rule,) = load(KUSTOMIZE / "overlays" / "pod-labels" / "rbac.yaml")["ClusterRole"]["rules"]
    assert rule == {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
