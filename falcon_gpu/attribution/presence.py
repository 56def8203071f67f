"""Is this a Kubernetes node? The ``kubernetes`` setting (CONTRACT section 2) decides.

``on``: yes, and anything missing is a fault; ``off``: never look (bare metal);
``auto``: yes when the kubelet socket or the pod log dirs exist. Checked on each
background refresh (two ``stat`` calls, off the cycle), so a kubelet started
after the agent is picked up; a bare-metal host with ``auto`` stays quiet.
"""

from __future__ import annotations

import os
from pathlib import Path

from falcon_gpu.attribution.settings import AttributionSettings

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where Kubernetes mounts a pod's service account token (``automountServiceAccountToken``)."""

PODMAN_FILE = Path("storage") / "overlay-containers" / "containers.json"
"""Under ``containers_root``: Podman's list of its containers and their names."""


def kubernetes_expected(settings: AttributionSettings) -> bool:
    """Whether the kubelet socket and log dirs should be read (and missing ones reported)."""
    if settings.kubernetes != "auto":
        return settings.kubernetes == "on"
    log_root = settings.log_root
    return any(p.exists() for p in (settings.kubelet_socket, log_root / "pods", log_root / "containers"))


def runtime_files_present(settings: AttributionSettings) -> bool:
    """Whether Docker's or Podman's files are here (the ``containers`` source applies)."""
    return (settings.docker_root / "containers").is_dir() or (settings.containers_root / PODMAN_FILE).exists()


def passwd_present(settings: AttributionSettings) -> bool:
    """Whether the host's passwd file is here (the ``passwd`` source applies)."""
    return settings.passwd_file.exists()


def kube_api_wanted(settings: AttributionSettings) -> bool:
    """Whether labels or quotas are asked of the API server (else it is never contacted).

    ``pod_labels`` and ``pod_requests`` ask for it outright (no access is then a fault);
    ``job_labels``, on by default, only where the agent was given access: an API server set by
    the caller (the simulator's) or, in a cluster, a mounted service account token. A DaemonSet
    without one (the base manifests) is not told to fail: its pods just carry no ``job_name``."""
    if settings.pod_labels or settings.pod_requests:
        return True
    return bool(settings.job_labels) and kube_api_access(settings)


def kube_api_access(settings: AttributionSettings) -> bool:
    """Whether the agent can ask the API server: one given to it, or the in-cluster one with a token."""
    if settings.kube_api is not None:
        return True
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (SERVICE_ACCOUNT / "token").exists()


def not_kubernetes_reason(settings: AttributionSettings) -> str:
    """Why Kubernetes sources are skipped here (doctor's SKIP rows)."""
    why = "kubernetes = off" if settings.kubernetes == "off" else "no kubelet socket or pod log dirs here"
    return f"{why}; not a Kubernetes node"
