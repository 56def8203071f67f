"""Pod attribution: every GPU byte and SM cycle to its namespace, pod and container.

Node-local and without subprocesses: NVML's host PIDs -> ``/proc/<pid>/cgroup``
(pod UID, container ID) -> names from the kubelet's log directories, joined with
the kubelet's PodResources allocations; pod labels from the API server only when
asked for. Each of those is a source in :mod:`falcon_gpu.attribution.registry`.
See docs/ATTRIBUTION.md.
"""

from falcon_gpu.attribution.attributor import Attributor
from falcon_gpu.attribution.settings import AttributionSettings

__all__ = ["AttributionSettings", "Attributor"]
