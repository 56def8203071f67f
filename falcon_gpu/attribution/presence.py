"""Is this a Kubernetes node? The ``kubernetes`` setting (CONTRACT section 2) decides.

``on``: yes, and anything missing is a fault; ``off``: never look (bare metal);
``auto``: yes when the kubelet socket or the pod log dirs exist. Checked on each
background refresh (two ``stat`` calls, off the cycle), so a kubelet started
after the agent is picked up; a bare-metal host with ``auto`` stays quiet.
"""

from __future__ import annotations

from falcon_gpu.attribution.settings import AttributionSettings


def kubernetes_expected(settings: AttributionSettings) -> bool:
    """Whether the kubelet socket and log dirs should be read (and missing ones reported)."""
    if settings.kubernetes != "auto":
        return settings.kubernetes == "on"
    log_root = settings.log_root
    return any(p.exists() for p in (settings.kubelet_socket, log_root / "pods", log_root / "containers"))


def not_kubernetes_reason(settings: AttributionSettings) -> str:
    """Why Kubernetes sources are skipped here (doctor's SKIP rows)."""
    why = "kubernetes = off" if settings.kubernetes == "off" else "no kubelet socket or pod log dirs here"
    return f"{why}; not a Kubernetes node"
