"""Process -> a plain container outside Kubernetes (Docker, Podman, containerd), from its cgroup.

Read only for processes whose cgroup names no pod (:mod:`falcon_gpu.attribution.cgroup`
first). The container ID is in the path; the runtime follows from its shape:

* Docker: ``/system.slice/docker-<id>.scope`` (systemd driver), ``/docker/<id>`` (cgroupfs);
* Podman: ``/machine.slice/libpod-<id>.scope`` (also ``…/libpod-<id>.scope/container`` under
  crun, and rootless under ``user@<uid>.service``), ``/libpod_parent/libpod-<id>``;
  ``libpod-conmon-<id>.scope`` is Podman's monitor, not the workload;
* containerd without Kubernetes (nerdctl, ctr): ``/system.slice/nerdctl-<id>.scope``, or
  ``/<namespace>/<id>`` under cgroupfs (the containerd namespace, e.g. ``default``).

Like the pod parser it scans segment by segment, never raises, and prefers the
cgroup v2 ``0::`` line over the v1 controller lines.
"""

from __future__ import annotations

import re

import msgspec

from falcon_gpu.attribution.cgroup import first_in_cgroup

_ID = "[0-9a-f]{64}"
# Patterns as strings: ``re`` compiles one on its first use and keeps it (its own cache), so a
# process that never meets such a path (every plugin start on a node without them) compiles none.
_SCOPE = rf"^(?P<prefix>docker|libpod|nerdctl)-(?P<id>{_ID})(?:\.scope)?$"
_BARE = rf"^{_ID}$"
_RUNTIME = {"docker": "docker", "libpod": "podman", "nerdctl": "containerd"}
_NOT_A_NAMESPACE = ("system.slice", "user.slice", "machine.slice", "libpod_parent", "docker")


class RuntimeContainer(msgspec.Struct, frozen=True, gc=False):
    """A container a process runs in, outside any pod: ``docker``, ``podman`` or ``containerd``."""

    runtime: str
    container_id: str
    namespace: str | None = None
    """containerd's namespace, when the path gives it."""


def parse_runtime_path(path: str) -> RuntimeContainer | None:
    segments = [s for s in path.split("/") if s and s not in (".", "..")]
    for i, segment in enumerate(segments):
        if "conmon" in segment:
            return None  # Podman's (or CRI-O's) container monitor: a runtime process
        scope = re.match(_SCOPE, segment)
        if scope is not None:
            return RuntimeContainer(_RUNTIME[scope.group("prefix")], scope.group("id"))
        if re.match(_BARE, segment) and i > 0:
            parent = segments[i - 1]
            if parent == "docker":
                return RuntimeContainer("docker", segment)
            if parent == "libpod_parent":
                return RuntimeContainer("podman", segment)
            if parent not in _NOT_A_NAMESPACE:
                return RuntimeContainer("containerd", segment, namespace=parent)
    return None


def parse_runtime_cgroup(text: str) -> RuntimeContainer | None:
    """The plain container a ``/proc/<pid>/cgroup`` file names, or None."""
    return first_in_cgroup(text, parse_runtime_path)
