"""Process -> pod UID and container ID, from the text of ``/proc/<pid>/cgroup``.

NVML reports host PIDs; the kubelet puts every container in a cgroup whose path
names the pod UID and the container ID. The path differs by cgroup version,
cgroup driver, runtime and QoS class, so :func:`parse_cgroup` scans the path
segment by segment instead of matching one fixed shape:

* cgroup v2 (``0::/path``) and v1 (one ``N:controllers:/path`` line per
  controller); the ``0::`` line is preferred, the v1 lines are the fallback
  (hybrid hosts have a ``0::`` line that names no pod).
* systemd driver: ``kubepods.slice/kubepods-burstable.slice/
  kubepods-burstable-pod<uid with _>.slice/cri-containerd-<id>.scope``;
  cgroupfs driver: ``/kubepods/besteffort/pod<uid>/<id>``; Guaranteed pods have
  no QoS level; a kubelet ``--cgroup-root`` adds a prefix
  (``kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod<uid>.slice``).
* runtimes: containerd (``cri-containerd-<id>.scope``), CRI-O
  (``crio-<id>.scope``, also followed by ``/container`` under crun; the
  ``crio-conmon-<id>.scope`` monitor is not the workload), Docker/cri-dockerd
  (``docker-<id>.scope``), or a bare ``<id>`` under cgroupfs.
* a private cgroup namespace shows paths relative to the reader's own cgroup
  (``0::/../../kubepods-…``); the ``..`` segments are skipped.
* static pods have a 32-hex UID (a hash of the manifest), not a dashed UUID.

A process in no pod (host daemon, dead PID, unreadable file) yields ``None``:
that is "unattributed", never an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import msgspec

T = TypeVar("T")

_HEX = "0-9a-fA-F"
_UUID = rf"[{_HEX}]{{8}}[-_][{_HEX}]{{4}}[-_][{_HEX}]{{4}}[-_][{_HEX}]{{4}}[-_][{_HEX}]{{12}}"
_POD_SEGMENT = re.compile(rf"^(?:.*-)?pod(?P<uid>{_UUID}|[{_HEX}]{{32}})(?:\.slice)?$")
_CONTAINER_SEGMENT = re.compile(
    rf"^(?:(?P<prefix>cri-containerd|crio|docker|containerd|cri-o)-)?(?P<id>[{_HEX}]{{64}})(?:\.scope)?$"
)
_CONMON = "crio-conmon-"


class CgroupIdentity(msgspec.Struct, frozen=True, gc=False):
    """Where a process lives: always a pod UID (dashed, lower case), a container ID when known."""

    pod_uid: str
    container_id: str | None


def parse_cgroup_path(path: str) -> CgroupIdentity | None:
    """The pod and container a single cgroup path names, or None when it names no pod."""
    segments = [s for s in path.split("/") if s and s != ".." and s != "."]
    for i, segment in enumerate(segments):
        m = _POD_SEGMENT.match(segment)
        if m is None:
            continue
        uid = m.group("uid").lower().replace("_", "-")
        for child in segments[i + 1 :]:
            if child.startswith(_CONMON):
                return None  # CRI-O's container monitor: a runtime process, not the workload
            c = _CONTAINER_SEGMENT.match(child)
            if c is not None:
                return CgroupIdentity(uid, c.group("id").lower())
        return CgroupIdentity(uid, None)
    return None


def parse_cgroup(text: str) -> CgroupIdentity | None:
    """The pod and container a ``/proc/<pid>/cgroup`` file names, or None (no pod).

    The cgroup v2 ``0::`` line wins when it names a pod; otherwise the first v1
    controller line that names one (they all agree on a kubelet node). Malformed
    lines are skipped, never raised.
    """
    v1_paths: list[str] = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, _controllers, path = parts
        if hierarchy == "0":
            found = parse_cgroup_path(path)
            if found is not None:
                return found
        else:
            v1_paths.append(path)
    best: CgroupIdentity | None = None
    for path in v1_paths:
        found = parse_cgroup_path(path)
        if found is not None:
            if found.container_id is not None:
                return found
            best = best or found
    return best


def first_in_cgroup(text: str, parse: Callable[[str], T | None]) -> T | None:
    """``parse`` over the paths of a ``/proc/<pid>/cgroup`` file: the cgroup v2 ``0::`` line first,
    then the v1 controller lines in file order; the first answer wins. Malformed lines are skipped."""
    lines = [parts for line in text.splitlines() if len(parts := line.split(":", 2)) == 3]
    for path in [p[2] for p in lines if p[0] == "0"] + [p[2] for p in lines if p[0] != "0"]:
        found = parse(path)
        if found is not None:
            return found
    return None


def read_cgroup_text(proc_root: Path, pid: int) -> str | None:
    """The text of ``<proc_root>/<pid>/cgroup``; None when the PID is gone or unreadable.

    Raises nothing: a dead PID or a PID outside our PID namespace view is simply
    not in any pod we can see.
    """
    try:
        with open(proc_root / str(pid) / "cgroup", encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None
