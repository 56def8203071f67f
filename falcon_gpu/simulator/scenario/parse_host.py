"""Parsing of a scenario's ``host`` section into :class:`HostScenario`.

Separate from :mod:`falcon_gpu.simulator.scenario.parse` because the host is the
attribution side of the simulator: proc cgroup files, kubelet PodResources
allocations and the log directory names that name pods and containers.
``allocatable`` (what GetAllocatableResources answers) is the scenario's
``host.allocatable`` list when given (e.g. a time-sliced GPU advertised as
``nvidia.com/gpu.shared`` replicas ``GPU-<uuid>::<n>``); otherwise it is derived
from the GPUs, the way the NVIDIA device plugin advertises them by default:
whole GPUs as ``nvidia.com/gpu``, MIG instances as ``nvidia.com/mig-<profile>``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from falcon_gpu.simulator.scenario.host_model import (
    ApiContainer,
    ApiPod,
    HostScenario,
    PodResourcesClaim,
    PodResourcesClaimDevice,
    PodResourcesContainer,
    PodResourcesDevice,
    PodResourcesPod,
)
from falcon_gpu.simulator.scenario.strict_json import Obj, ScenarioError

if TYPE_CHECKING:
    from falcon_gpu.simulator.scenario.model import GpuScenario

T = TypeVar("T")


def _devices(o: Obj, key: str = "devices") -> tuple[PodResourcesDevice, ...]:
    out = []
    for d in o.objects(key):
        out.append(
            PodResourcesDevice(resource_name=d.string("resource_name"), device_ids=d.strings("device_ids"))
        )
        d.done()
    return tuple(out)


def _each(o: Obj, key: str, make: Callable[[Obj], T]) -> tuple[T, ...]:
    """``make`` of every object in the list ``key`` (none when it is left out), each then checked
    for keys nobody read."""
    out = []
    for item in o.objects(key):
        out.append(make(item))
        item.done()
    return tuple(out)


def _claim_device(d: Obj) -> PodResourcesClaimDevice:
    return PodResourcesClaimDevice(d.string("driver_name"), d.string("pool_name"), d.string("device_name"))


def _claim(c: Obj) -> PodResourcesClaim:
    return PodResourcesClaim(
        c.string("claim_name"), c.string("claim_namespace"), _each(c, "claim_resources", _claim_device)
    )


def _claims(o: Obj) -> tuple[PodResourcesClaim, ...]:
    """A container's ``dynamic_resources`` (DRA claims); none when the key is left out."""
    return _each(o, "dynamic_resources", _claim)


def _pods(o: Obj) -> tuple[PodResourcesPod, ...]:
    pods = []
    for p in o.objects("pod_resources"):
        containers = []
        for c in p.objects("containers"):
            containers.append(
                PodResourcesContainer(
                    name=c.string("name"), devices=_devices(c), dynamic_resources=_claims(c)
                )
            )
            c.done()
        pods.append(
            PodResourcesPod(
                namespace=p.string("namespace"), name=p.string("name"), containers=tuple(containers)
            )
        )
        p.done()
    return tuple(pods)


_Environ = tuple[tuple[int, tuple[tuple[str, str], ...]], ...]


def _proc(o: Obj) -> tuple[dict[int, str], tuple[tuple[int, int], ...], _Environ]:
    cgroups: dict[int, str] = {}
    uids: list[tuple[int, int]] = []
    environ: list[tuple[int, tuple[tuple[str, str], ...]]] = []
    for pid_text, value, path in o.mapping("proc"):
        if not pid_text.isdigit():
            raise ScenarioError(f"{path}: expected a process id (digits) as the key, got {pid_text!r}")
        entry = Obj(value, path)
        cgroups[int(pid_text)] = entry.string("cgroup")
        if entry.has("uid"):
            uids.append((int(pid_text), entry.integer("uid")))
        if entry.has("environ"):
            environ.append((int(pid_text), _text_map(entry, "environ")))
        entry.done()
    return cgroups, tuple(uids), tuple(environ)


def _users(o: Obj) -> tuple[tuple[str, int], ...]:
    out = []
    for u in o.objects("users"):
        out.append((u.string("name"), u.integer("uid")))
        u.done()
    return tuple(out)


def allocatable_for(gpus: Sequence[GpuScenario]) -> tuple[PodResourcesDevice, ...]:
    """What the device plugin would advertise for these GPUs."""
    whole = tuple(g.uuid for g in gpus if not g.mig)
    out = [PodResourcesDevice("nvidia.com/gpu", whole)] if whole else []
    by_profile: dict[str, list[str]] = {}
    for gpu in gpus:
        for mig in gpu.mig:
            by_profile.setdefault(mig.profile, []).append(mig.uuid)
    out.extend(PodResourcesDevice(f"nvidia.com/mig-{p}", tuple(u)) for p, u in by_profile.items())
    return tuple(out)


def _runtime_containers(o: Obj, key: str) -> tuple[tuple[str, str], ...]:
    """``docker_containers`` / ``podman_containers``: (container ID, name) pairs."""
    return _each(o, key, lambda c: (c.file_name("id"), c.string("name")))  # Docker's ID names a directory


def _text_map(o: Obj, key: str) -> tuple[tuple[str, str], ...]:
    """An optional object of strings (labels, resource quantities), in file order."""
    out = []
    for name, value, path in o.mapping(key):
        if not isinstance(value, str):
            raise ScenarioError(f"{path}: expected a string (a quantity is text, as in a pod spec)")
        out.append((name, value))
    return tuple(out)


def _api_container(c: Obj) -> ApiContainer:
    return ApiContainer(c.string("name"), _text_map(c, "limits"), _text_map(c, "requests"))


def _api_pod(p: Obj) -> ApiPod:
    return ApiPod(
        p.string("namespace"),
        p.string("name"),
        p.string("uid"),
        _text_map(p, "labels"),
        _each(p, "containers", _api_container),
        _text_map(p, "owner"),
    )


def parse_host(o: Obj, gpus: Sequence[GpuScenario]) -> HostScenario:
    """Raises ScenarioError naming the path of a wrong or unknown key."""
    cgroups, uids, environ = _proc(o)
    host = HostScenario(
        proc_cgroups=cgroups,
        pod_resources=_pods(o),
        log_containers=o.file_names("log_containers"),
        log_pods=o.file_names("log_pods"),
        allocatable=_devices(o, "allocatable") if o.raw("allocatable") is not None else allocatable_for(gpus),
        docker_containers=_runtime_containers(o, "docker_containers"),
        podman_containers=_runtime_containers(o, "podman_containers"),
        api_pods=_each(o, "api_pods", _api_pod),  # this node's pods as the API server lists them
        proc_uids=uids,
        proc_environ=environ,
        users=_users(o),
    )
    o.done()
    return host
