"""A workload: what survives a restart of its pods.

A restarted Deployment pod gets a new name (``web-7d4f8b9c5-x2k9z``), a Job's retry a new
suffix, a StatefulSet pod keeps its ordinal: advice about "this pod" would be about something
gone. The workload is, first, the pod's controller from the API server's ``ownerReferences``
(a ReplicaSet stands for its Deployment: its ``pod-template-hash`` suffix is dropped); without
the API (``pod_labels``/``pod_requests`` off), the pod name without the suffix Kubernetes
generates (ReplicaSet hash and random suffix, Job or DaemonSet suffix, StatefulSet ordinal);
outside Kubernetes, the container's name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_ALNUM = "[bcdfghjklmnpqrstvwxz2456789]"
"""The alphabet of Kubernetes' generated names (no vowels, no 0/1/3: no words, no look-alikes)."""
_GENERATED = (
    re.compile(rf"(.+)-{_ALNUM}{{6,10}}-{_ALNUM}{{5}}"),  # Deployment -> ReplicaSet hash -> pod
    re.compile(rf"(.+)-{_ALNUM}{{5}}"),  # Job, DaemonSet, ReplicaSet, generateName
    re.compile(r"(.+)-\d+"),  # StatefulSet ordinal
)
_REPLICASET = re.compile(rf"(.+)-{_ALNUM}{{6,10}}")


def controller(meta: Mapping[str, Any]) -> str | None:
    """The workload named by a pod's ``metadata.ownerReferences`` (the one with ``controller``),
    a ReplicaSet read as its Deployment; None for a bare pod."""
    for ref in meta.get("ownerReferences") or ():
        if not isinstance(ref, Mapping) or not ref.get("controller"):
            continue
        name = str(ref.get("name") or "")
        if not name:
            return None
        if ref.get("kind") == "ReplicaSet":
            template = str((meta.get("labels") or {}).get("pod-template-hash") or "")
            if template and name.endswith("-" + template):
                return name[: -len(template) - 1]
            if (m := _REPLICASET.fullmatch(name)) is not None:
                return m.group(1)
        return name
    return None


def from_pod_name(pod: str) -> str:
    """``web-7d4f8b9c5-x2k9z`` -> ``web``; ``db-0`` -> ``db``; a name with no generated suffix as is."""
    for pattern in _GENERATED:
        if (m := pattern.fullmatch(pod)) is not None:
            return m.group(1)
    return pod


def workload_of(pod: str, container: str, owner: str | None = None) -> str:
    """The workload of a pod's container: its controller, else its pod's name without the
    generated suffix, else (no pod: a Docker or Podman container) the container's name."""
    if owner:
        return owner
    return from_pod_name(pod) if pod else container
