"""What a pod's containers were given on shared GPUs, read from the pod spec (``pod_requests``).

Sharing device plugins hand out quotas as extended resources, so the quota is in
the pod's ``resources`` and nowhere on the node. The units (docs/ATTRIBUTION.md,
"Requested vs used", cites them):

* HAMi ``nvidia.com/gpumem``: MiB of memory per vGPU; ``nvidia.com/gpucores``:
  percent of one GPU's compute per vGPU.
* tkestack gpu-manager ``tencent.com/vcuda-memory``: units of 256 MiB;
  ``tencent.com/vcuda-core``: 1/100 of a GPU (100 = one whole GPU; above 100 only
  multiples of 100, i.e. whole GPUs). Values here are per GPU: the memory is
  spread over the GPUs the cores ask for.
* ``nvidia.com/gpu`` (whole GPUs, and time-sliced replicas alike, also under the device
  plugin's renamed ``nvidia.com/gpu.shared``): compute 1 per GPU,
  unless the container carries a HAMi or gpu-manager quota: there ``nvidia.com/gpu``
  counts vGPUs, and only the quota says how much of each.

A quota of 0 reserves nothing, so no used/requested ratio can be taken to it (it
would be +Inf): HAMi's ``gpucores`` 0 is "no compute reserved; it may fit in any
GPU with enough device memory" (HAMi's ``defaultCores``, which a container naming
no ``gpucores`` gets, unless its memory is exclusive: then admission writes 100
into the spec, read here as 1.0); ``vcuda-core`` 0 likewise; ``gpumem`` 0 leaves the
memory to HAMi's default. Such a quota gives no requested
series (the other quota of the same container still does), never a 0.

Extended resources cannot be overcommitted, so a limit equals its request; the
limit is read first and the request where only it is set. A container that asks
for none of these gets no entry: its requested series are absent, not 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

MIB = 1 << 20
VCUDA_MEMORY_UNIT = 256 * MIB

HAMI_MEMORY = "nvidia.com/gpumem"
HAMI_CORES = "nvidia.com/gpucores"
VCUDA_MEMORY = "tencent.com/vcuda-memory"
VCUDA_CORE = "tencent.com/vcuda-core"
WHOLE_GPU = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
"""Whole GPUs, and time-sliced replicas (the device plugin's renamed ``.shared`` resource)."""


class Requested(msgspec.Struct, frozen=True, gc=False):
    """One container's quota on each GPU it is on; None: it asked for no such quota."""

    memory_bytes: int | None = None
    compute_ratio: float | None = None


def _amount(resources: Mapping[str, Any], name: str) -> int | None:
    for kind in ("limits", "requests"):
        value = (resources.get(kind) or {}).get(name)
        if value is not None:
            try:
                return int(str(value))
            except ValueError:
                return None  # not an integer quantity: extended resources are whole numbers
    return None


def _positive(value: int | None) -> int | None:
    """A quota of 0 reserves nothing (see the module docstring): no ratio can be taken to it."""
    return value if value is not None and value > 0 else None


def container_requested(resources: Mapping[str, Any]) -> Requested | None:
    """The per-GPU quota of one container's ``resources``; None when it asked for none."""
    raw = {name: _amount(resources, name) for name in (HAMI_MEMORY, HAMI_CORES, VCUDA_MEMORY, VCUDA_CORE)}
    sharing = any(v is not None for v in raw.values())  # a sharing plugin's container, even at 0
    hami_mem, hami_cores, vcuda_mem, vcuda_core = (_positive(v) for v in raw.values())
    memory: int | None = None
    compute: float | None = None
    if hami_mem is not None:
        memory = hami_mem * MIB
    if hami_cores is not None:
        compute = hami_cores / 100
    if vcuda_core is not None:
        gpus = max(1, vcuda_core // 100)
        compute = min(vcuda_core / 100, 1.0)
        if vcuda_mem is not None:
            memory = vcuda_mem * VCUDA_MEMORY_UNIT // gpus
    elif vcuda_mem is not None:
        memory = vcuda_mem * VCUDA_MEMORY_UNIT
    if not sharing and any((_amount(resources, name) or 0) > 0 for name in WHOLE_GPU):
        compute = 1.0
    if memory is None and compute is None:
        return None
    return Requested(memory, compute)


def pod_requested(item: Mapping[str, Any]) -> dict[str, Requested]:
    """container name -> quota, for one pod of the API's pod list."""
    out: dict[str, Requested] = {}
    for container in (item.get("spec") or {}).get("containers") or []:
        found = container_requested(container.get("resources") or {})
        if found is not None:
            out[str(container.get("name", ""))] = found
    return out
