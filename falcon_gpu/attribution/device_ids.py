"""kubelet device IDs -> the GPU (or MIG instance) they name, and which resources are GPUs.

Device plugins hand the kubelet opaque IDs; the ones seen in the wild:

* ``GPU-<uuid>``: the NVML UUID itself (NVIDIA device plugin, default);
* ``MIG-<uuid>``: a MIG instance's NVML UUID; older drivers used
  ``MIG-GPU-<uuid>/<gi>/<ci>``;
* ``GPU-<uuid>::<n>`` / ``MIG-<uuid>::<n>``: replicas of one device under
  time-slicing or MPS sharing; the suffix is stripped and the replicas of one
  container de-duplicated (one container, one GPU, counted once);
* GKE's plugin: ``nvidia<N>`` (the GPU of ``/dev/nvidia<N>``) and ``nvidia<N>/gi<M>``
  (GPU instance M on GPU N); with GKE GPU time-sharing every one of those is
  handed out as replicas ``<id>/vgpu<k>``, stripped and de-duplicated like ``::<n>``.

DRA (``dynamic_resources``) names devices by the driver's own scheme; for NVIDIA's
``gpu.nvidia.com`` (:func:`parse_dra_device`): ``gpu-<minor>`` is the GPU of
``/dev/nvidia<minor>``, ``gpu-<parent minor>-mig-<profile>-<profile id>-<placement>``
a MIG instance of that profile on it (``1g10gb``: the NVML profile ``1g.10gb``
without its dot).

Parsing happens when allocations are fetched; resolving against the devices of
one snapshot happens in the join, because index-based IDs need NVML's view.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence

import msgspec

# Patterns as strings: ``re`` compiles one on its first use and keeps it (its own cache), so a
# process that never meets such a path (every plugin start on a node without them) compiles none.
_GKE = r"^nvidia(?P<index>\d+)(?:/gi(?P<gi>\d+))?(?:/vgpu\d+)?$"
_OLD_MIG = r"^MIG-(?P<gpu>GPU-[^/]+)/(?P<gi>\d+)/(?P<ci>\d+)$"
_DRA_GPU = r"^gpu-(?P<minor>\d+)$"
_DRA_MIG = r"^gpu-(?P<minor>\d+)-mig-(?P<profile>[0-9a-z][0-9a-z-]*?)-(?P<profile_id>\d+)-(?P<placement>\d+)$"
_NOT_IN_DRA_NAME = r"[^0-9a-z]+"


class DeviceRef(msgspec.Struct, frozen=True, gc=False):
    """One parsed device ID. Exactly one way of naming is set."""

    gpu_uuid: str | None = None
    mig_uuid: str | None = None
    gpu_index: int | None = None
    """GKE's ``nvidia<N>``: the device node minor N (matched against NVML's minor number)."""
    gpu_instance_id: int | None = None
    """With ``gpu_uuid`` or ``gpu_index``: the MIG GPU instance on that GPU."""
    mig_profile: str | None = None
    """With ``gpu_index`` (DRA): a MIG instance of this profile, in DRA spelling (:func:`dra_profile`)."""
    mig_placement: int | None = None
    """With ``mig_profile``: the instance's placement start slot on its GPU."""


def parse_device_id(device_id: str) -> DeviceRef | None:
    """Parse one kubelet device ID; None for an ID that names no NVIDIA GPU."""
    raw = device_id.strip()
    if "::" in raw:
        raw = raw.split("::", 1)[0]
    if not raw:
        return None
    old = re.match(_OLD_MIG, raw)
    if old is not None:
        return DeviceRef(gpu_uuid=old.group("gpu"), gpu_instance_id=int(old.group("gi")))
    if raw.startswith("MIG-"):
        return DeviceRef(mig_uuid=raw)
    if raw.startswith("GPU-"):
        return DeviceRef(gpu_uuid=raw)
    gke = re.match(_GKE, raw)
    if gke is not None:
        gi = gke.group("gi")
        return DeviceRef(gpu_index=int(gke.group("index")), gpu_instance_id=int(gi) if gi else None)
    return None


def dra_profile(profile: str) -> str:
    """An NVML MIG profile as a DRA device name spells it: ``1g.10gb+me`` -> ``1g10gb-me``."""
    return re.sub(_NOT_IN_DRA_NAME, "-", profile.lower().replace(".", "")).strip("-")


def parse_dra_device(device_name: str) -> DeviceRef | None:
    """A ``gpu.nvidia.com`` DRA device name; None for names of another shape (e.g. ``gpu-vfio-0``)."""
    whole = re.match(_DRA_GPU, device_name)
    if whole is not None:
        return DeviceRef(gpu_index=int(whole.group("minor")))
    mig = re.match(_DRA_MIG, device_name)
    if mig is not None:
        return DeviceRef(
            gpu_index=int(mig.group("minor")),
            mig_profile=mig.group("profile"),
            mig_placement=int(mig.group("placement")),
        )
    return None


def parse_device_ids(device_ids: Iterable[str]) -> tuple[DeviceRef, ...]:
    """Parse and de-duplicate (shared replicas ``::<n>`` collapse to one), keeping order."""
    seen: dict[DeviceRef, None] = {}
    for device_id in device_ids:
        ref = parse_device_id(device_id)
        if ref is not None:
            seen.setdefault(ref, None)
    return tuple(seen)


def is_gpu_resource(resource_name: str, patterns: Sequence[str]) -> bool:
    """Whether a kubelet resource name matches one of the ``gpu_resources`` globs."""
    return any(fnmatch.fnmatchcase(resource_name, p) for p in patterns)
