"""Lay out the node around the simulated GPUs, so attribution runs its real readers.

From a scenario's ``host`` part, :class:`SimulatedHost` writes, under one
directory:

* ``proc/<pid>/cgroup`` for every scenario PID (what ``proc_root`` points at);
* ``log/pods/<namespace>_<pod>_<uid>/<container>/0.log`` and
  ``log/containers/<pod>_<namespace>_<container>-<id>.log`` as a symlink to
  it, the way the kubelet lays them out (``log_root``);
* a real PodResources v1 gRPC server on ``kubelet.sock`` answering ``List``
  and ``GetAllocatableResources`` (``kubelet_socket``);
* ``docker/containers/<id>/config.v2.json`` for every plain Docker container
  (``docker_root``), as Docker's data root holds them;
* ``containers/storage/overlay-containers/containers.json`` listing every Podman
  container (``containers_root``), as Podman's containers storage holds them;
* where the scenario has ``api_pods``: a loopback Kubernetes API server
  (:mod:`falcon_gpu.simulator.node.kube_api_server`) listing them as this node's
  pods, and the bearer token it wants in ``kube-api-token`` (``paths.kube_api``);
* ``/proc/<pid>/status`` (its ``Uid:`` line) where a process has a ``uid``, and
  ``passwd`` for the scenario's ``users`` (``passwd_file``): Slurm job owners;
* ``/proc/<pid>/environ`` where a process has an ``environ`` (``SLURM_JOB_NAME``: a Slurm job's name).

Unix socket paths are limited to about 100 bytes, so when ``base_dir`` is deep
the socket goes to a short temporary directory of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
from pathlib import Path

import msgspec

from falcon_gpu.attribution.kube_api import KubeApiConfig
from falcon_gpu.attribution.logdirs import parse_container_log, parse_pod_dir
from falcon_gpu.attribution.presence import PODMAN_FILE
from falcon_gpu.simulator.node.kube_api_server import KubeApiServer
from falcon_gpu.simulator.node.podresources_server import PodResourcesServer
from falcon_gpu.simulator.scenario.host_model import HostScenario

_MAX_SOCKET_PATH = 100


class HostPaths(msgspec.Struct, frozen=True, gc=False):
    proc_root: Path
    log_root: Path
    kubelet_socket: Path
    docker_root: Path
    containers_root: Path
    """Podman's storage (empty where the scenario has no Podman containers: the host's own never
    leaks into a simulation)."""
    passwd_file: Path
    """The scenario's users (absent where it has none: the host's own never leaks in)."""
    kube_api: KubeApiConfig | None = None
    """The simulated API server and its token; None where the scenario has no ``api_pods``."""


class SimulatedHost:
    def __init__(self, host: HostScenario, base_dir: Path | None = None, *, node: str = "") -> None:
        """``node``: the node name the API server's pods are on (the agent's ``node``), so that
        its ``spec.nodeName`` field selector finds them."""
        self.host = host
        self._base_dir = base_dir
        self._node = node
        self._made: list[Path] = []
        self._server: PodResourcesServer | None = None
        self._kube_api: KubeApiServer | None = None
        self.paths: HostPaths | None = None

    @property
    def kube_api_server(self) -> KubeApiServer | None:
        """The API server (tests make it fail); None where the scenario has no ``api_pods``."""
        return self._kube_api

    @property
    def server(self) -> PodResourcesServer | None:
        """The PodResources server (tests stop and restart it to model a kubelet restart)."""
        return self._server

    def start(self) -> HostPaths:
        """Write the trees and start the servers. Raises OSError/RuntimeError when it cannot,
        having stopped what it had started (a server left running would outlive the agent)."""
        if self.paths is not None:
            return self.paths
        try:
            self.paths = self._start()
        except BaseException:
            self.stop()
            raise
        return self.paths

    def _start(self) -> HostPaths:
        if self._base_dir is None:
            base = Path(tempfile.mkdtemp(prefix="fgpu-host-"))
            self._made.append(base)
        else:
            base = self._base_dir
            base.mkdir(parents=True, exist_ok=True)
        proc_root = base / "proc"
        log_root = base / "log"
        self._write_proc(proc_root)
        self._write_logs(log_root)
        docker_root = base / "docker"
        self._write_docker(docker_root)
        containers_root = base / "containers"
        self._write_podman(containers_root)
        socket = base / "kubelet.sock"
        if len(str(socket)) > _MAX_SOCKET_PATH:
            short = Path(tempfile.mkdtemp(prefix="fgpu-sock-"))
            self._made.append(short)
            socket = short / "kubelet.sock"
        self._server = PodResourcesServer(socket, self.host.pod_resources, self.host.allocatable)
        self._server.start()
        passwd = base / "passwd"
        if self.host.users:
            passwd.write_text(
                "".join(f"{n}:x:{uid}:{uid}::/home/{n}:/bin/sh\n" for n, uid in self.host.users)
            )
        kube_api = self._start_kube_api(base) if self.host.api_pods else None
        return HostPaths(proc_root, log_root, socket, docker_root, containers_root, passwd, kube_api)

    def _start_kube_api(self, base: Path) -> KubeApiConfig:
        token = secrets.token_urlsafe(24)
        token_file = base / "kube-api-token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        self._kube_api = KubeApiServer(self.host.api_pods, self._node, token)
        return KubeApiConfig(self._kube_api.start(), token_file, None)

    def _write_proc(self, proc_root: Path) -> None:
        for pid, text in self.host.proc_cgroups.items():
            d = proc_root / str(pid)
            d.mkdir(parents=True, exist_ok=True)
            (d / "cgroup").write_text(text if text.endswith("\n") else text + "\n")
        for pid, uid in self.host.proc_uids:
            (proc_root / str(pid) / "status").write_text(f"Name:\tpython\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
        for pid, variables in self.host.proc_environ:
            (proc_root / str(pid) / "environ").write_bytes(
                b"".join(f"{k}={v}\0".encode() for k, v in variables)
            )

    def _write_logs(self, log_root: Path) -> None:
        pods_dir = log_root / "pods"
        containers_dir = log_root / "containers"
        pods_dir.mkdir(parents=True, exist_ok=True)
        containers_dir.mkdir(parents=True, exist_ok=True)
        pod_dirs: dict[tuple[str, str], str] = {}
        for name in self.host.log_pods:
            (pods_dir / name).mkdir(exist_ok=True)
            parsed = parse_pod_dir(name)
            if parsed is not None:
                pod_dirs[(parsed[1].namespace, parsed[1].pod)] = name
        for name in self.host.log_containers:
            link = containers_dir / name
            parsed_c = parse_container_log(name)
            pod_dir = pod_dirs.get((parsed_c[1].namespace, parsed_c[1].pod)) if parsed_c else None
            if parsed_c is None or pod_dir is None:
                link.touch()  # no pod directory to point into: a plain file still names the container
                continue
            target = pods_dir / pod_dir / parsed_c[1].container / "0.log"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
            with contextlib.suppress(FileNotFoundError):
                link.unlink()
            os.symlink(target, link)

    def _write_docker(self, docker_root: Path) -> None:
        for cid, name in self.host.docker_containers:
            d = docker_root / "containers" / cid
            d.mkdir(parents=True, exist_ok=True)
            (d / "config.v2.json").write_text(json.dumps({"ID": cid, "Name": "/" + name}))

    def _write_podman(self, containers_root: Path) -> None:
        if not self.host.podman_containers:
            return
        listing = containers_root / PODMAN_FILE
        listing.parent.mkdir(parents=True, exist_ok=True)
        entries = [
            {"id": cid, "names": [name], "image": "", "layer": ""}
            for cid, name in self.host.podman_containers
        ]
        listing.write_text(json.dumps(entries))

    def stop(self) -> None:
        """Stop the servers and remove what start() created in temporary directories."""
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._kube_api is not None:
            self._kube_api.stop()
            self._kube_api = None
        for made in self._made:
            shutil.rmtree(made, ignore_errors=True)
        self._made.clear()
        self.paths = None
