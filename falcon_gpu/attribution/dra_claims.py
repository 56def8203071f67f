"""GPUs handed out by Dynamic Resource Allocation: PodResources ``dynamic_resources`` -> allocations.

From Kubernetes 1.34 (DRA on by default) a GPU a pod claims through NVIDIA's DRA
driver is listed not under ``devices`` but under
``ContainerResources.dynamic_resources``: the claim's name and namespace and, per
device, the driver, its pool and the driver's device name. For ``gpu.nvidia.com``
the device name says which GPU it is (``gpu-<minor>``, or a MIG instance
``gpu-<parent minor>-mig-<profile>-<profile id>-<placement>``, see
:func:`~falcon_gpu.attribution.device_ids.parse_dra_device`), so no ResourceSlice
informer and no API access are needed. An allocation's resource is
``dra:<driver>`` and it carries the claim's name and namespace.

The claims come with the same List answer as the device-plugin allocations, so
the ``kubelet`` source maps them (one call, one health, one warning when the
kubelet is down). A device of another driver, or a name of another shape, is
left unmapped and reported through ``unknown`` (counted as
``errors_total{kind="dra_driver"}`` and logged once per driver by the caller).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from falcon_gpu.attribution.device_ids import DeviceRef, parse_dra_device
from falcon_gpu.attribution.podresources.client import ClaimDevice
from falcon_gpu.attribution.source import Allocation

NVIDIA_DRIVER = "gpu.nvidia.com"


def claim_allocations(
    claims: Sequence[ClaimDevice], unknown: Callable[[ClaimDevice], None]
) -> tuple[Allocation, ...]:
    """One allocation per (container, claim) with the devices this agent can map; ``unknown``
    is called for every other device."""
    devices: dict[tuple[str, str, str, str, str, str], dict[DeviceRef, None]] = {}
    for claim in claims:
        ref = parse_dra_device(claim.device) if claim.driver == NVIDIA_DRIVER else None
        if ref is None:
            unknown(claim)
            continue
        key = (
            claim.namespace,
            claim.pod,
            claim.container,
            claim.driver,
            claim.claim_name,
            claim.claim_namespace,
        )
        devices.setdefault(key, {})[ref] = None
    return tuple(
        Allocation(ns, pod, container, f"dra:{driver}", tuple(refs), claim_name, claim_ns)
        for (ns, pod, container, driver, claim_name, claim_ns), refs in devices.items()
    )


def unknown_message(claim: ClaimDevice) -> str:
    """The warning for a claimed device that maps to no GPU (logged once per driver)."""
    what = "driver" if claim.driver != NVIDIA_DRIVER else "device name"
    return (
        f"DRA claim {claim.claim_namespace}/{claim.claim_name} of pod {claim.namespace}/{claim.pod} "
        f"has device {claim.device!r} of driver {claim.driver!r}: unknown {what}, left unmapped "
        f"(only {NVIDIA_DRIVER} devices gpu-<minor> and gpu-<minor>-mig-<profile>-<id>-<placement> are)"
    )
