"""Pod and container names from the kubelet's log directories, with no API access at all.

The kubelet names ``<log_root>/pods/<namespace>_<pod>_<uid>/`` after each pod and
links ``<log_root>/containers/<pod>_<namespace>_<container>-<id>.log`` to the
container's log inside that directory. Namespaces, pod names and container names
are DNS names (no ``_``) and IDs are hex, so the names split unambiguously. A name
that is not UTF-8 (the file system allows any bytes) is decoded with replacement
(:func:`~falcon_gpu.model.text.host_name`): its pod keeps a name every sink can send.

:class:`LogDirScanner` keeps the parse of every entry it has seen, so a rescan
costs one directory listing plus work for new entries only; entries that
disappeared (finished pods) leave the maps. The result is an immutable
:class:`NameMaps` that the hot path reads without locking.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import msgspec

from falcon_gpu.model.text import host_name

_CONTAINER_LOG = re.compile(
    r"^(?P<pod>[^_]+)_(?P<ns>[^_]+)_(?P<container>[^_]+)-(?P<id>[0-9a-fA-F]{64})\.log$"
)


class PodName(msgspec.Struct, frozen=True, gc=False):
    namespace: str
    pod: str


class ContainerName(msgspec.Struct, frozen=True, gc=False):
    namespace: str
    pod: str
    container: str
    pod_uid: str | None = None
    """From the log link's target, when the link is readable."""


class NameMaps(msgspec.Struct, frozen=True, gc=False):
    pods: dict[str, PodName] = {}
    """pod UID -> namespace and name."""
    containers: dict[str, ContainerName] = {}
    """container ID -> namespace, pod and container name."""


def parse_pod_dir(name: str) -> tuple[str, PodName] | None:
    """``<namespace>_<pod>_<uid>`` -> (uid, name); None for anything else."""
    parts = name.split("_")
    if len(parts) != 3 or not all(parts):
        return None
    namespace, pod, uid = parts
    return uid.lower(), PodName(namespace, pod)


def parse_container_log(name: str, link_target: str | None = None) -> tuple[str, ContainerName] | None:
    """``<pod>_<namespace>_<container>-<id>.log`` -> (container id, name); None otherwise.

    ``link_target`` (``…/pods/<ns>_<pod>_<uid>/<container>/0.log``) adds the pod UID.
    """
    m = _CONTAINER_LOG.match(name)
    if m is None:
        return None
    uid: str | None = None
    if link_target:
        parts = Path(link_target).parts
        if len(parts) >= 3:
            parsed = parse_pod_dir(parts[-3])
            uid = parsed[0] if parsed else None
    return m.group("id").lower(), ContainerName(m.group("ns"), m.group("pod"), m.group("container"), uid)


class LogDirScanner:
    """Rescans ``<log_root>/pods`` and ``<log_root>/containers``; not thread-safe (one refresher calls it)."""

    def __init__(self, log_root: Path) -> None:
        self.log_root = log_root
        self._pod_entries: dict[str, tuple[str, PodName] | None] = {}
        self._container_entries: dict[str, tuple[str, ContainerName] | None] = {}

    def scan(self) -> NameMaps:
        """List both directories and return fresh maps.

        Raises OSError when a directory is missing or unreadable (the caller
        counts it and keeps the previous maps); a single odd entry is skipped.
        """
        pods_dir = self.log_root / "pods"
        containers_dir = self.log_root / "containers"
        pod_names = os.listdir(pods_dir)
        container_names = os.listdir(containers_dir)

        pod_entries: dict[str, tuple[str, PodName] | None] = {}
        for name in pod_names:
            known = name in self._pod_entries
            pod_entries[name] = self._pod_entries[name] if known else parse_pod_dir(host_name(name))
        container_entries: dict[str, tuple[str, ContainerName] | None] = {}
        for name in container_names:
            if name in self._container_entries:
                container_entries[name] = self._container_entries[name]
                continue
            target: str | None = None
            if name.endswith(".log"):
                try:
                    target = host_name(os.readlink(containers_dir / name))
                except OSError:
                    target = None  # a plain file (simulator, some runtimes), or already gone
            container_entries[name] = parse_container_log(host_name(name), target)
        self._pod_entries = pod_entries
        self._container_entries = container_entries
        return NameMaps(
            pods=dict(e for e in pod_entries.values() if e is not None),
            containers=dict(e for e in container_entries.values() if e is not None),
        )
