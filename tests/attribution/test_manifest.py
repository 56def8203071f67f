"""The DaemonSet gives attribution what it needs, at the paths the settings default to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.settings import Settings, load_settings

yaml = pytest.importorskip("yaml")

MANIFEST = Path(__file__).resolve().parents[2] / "conf" / "manifests" / "daemonset.yaml"


def docs() -> dict[str, Any]:
    return {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text())}


def test_daemonset_has_host_pids_and_read_only_mounts() -> None:
    spec = docs()["DaemonSet"]["spec"]["template"]["spec"]
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


def test_configmap_is_a_valid_configuration(tmp_path: Path) -> None:
    config = tmp_path / "falcon-gpu.toml"
    config.write_text(docs()["ConfigMap"]["data"]["falcon-gpu.toml"])
    settings = load_settings(config)
    assert settings.gpu_resources == ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*"]


def test_rbac_only_reads_pods() -> None:
    (rule,) = docs()["ClusterRole"]["rules"]
    assert rule == {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
