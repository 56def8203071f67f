"""Is this a Kubernetes node? The ``kubernetes`` setting (CONTRACT section 2) decides.

``on``: yes, and anything missing is a fault; ``off``: never look (bare metal);
``auto``: yes when the kubelet socket or the pod log dirs exist. Checked on each
background refresh (two ``stat`` calls, off the cycle), so a kubelet started
after the agent is picked up; a bare-metal host with ``auto`` stays quiet.
"""

from __future__ import annotations

from falcon_gpu.settings import Settings


def kubernetes_expected(settings: Settings) -> bool:
    """Whether the kubelet socket and log dirs should be read (and missing ones reported)."""
    if settings.kubernetes != "auto":
        return settings.kubernetes == "on"
    log_root = settings.log_root
    return any(p.exists() for p in (settings.kubelet_socket, log_root / "pods", log_root / "containers"))
