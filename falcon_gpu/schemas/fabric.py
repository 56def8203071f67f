"""The NVLink fabric's series in each schema (:mod:`falcon_gpu.model.fabric` says what they mean).

Kept together, apart from the board's series, because a GPU has them only on an NVLink fabric
(Hopper and later on NVSwitch systems, GB200/GB300 NVL racks); elsewhere none of them exists.

- ``falcon_gpu``: ``fabric_info{clique_id, cluster_uuid}`` 1, ``fabric_state`` (NVML's state: 0 not
  supported, 1 not started, 2 in progress, 3 completed), ``fabric_status`` (the registration's NVML
  return code, 0: success), ``fabric_health_mask`` (the raw mask) and ``fabric_fault{condition}``, 1
  while the fabric reports that condition (each condition the mask supports: ``degraded_bandwidth``,
  ``route_recovery``, ``route_unhealthy``, ``access_timeout_recovery``, ``incorrect_configuration``).
- ``dcgm``: DCGM's field names, as dcgm-exporter emits them when its collector lists them:
  ``DCGM_FI_DEV_FABRIC_MANAGER_STATUS`` (``dcgmFabricManagerStatus_t``: 0 not supported, 1 not
  started, 2 in progress, 3 success, 4 failure: completed with an error status),
  ``DCGM_FI_DEV_FABRIC_CLIQUE_ID`` and ``DCGM_FI_DEV_FABRIC_HEALTH_MASK``; the cluster UUID, a string
  field that dcgm-exporter can only add as a label, is the ``DCGM_FI_DEV_FABRIC_CLUSTER_UUID`` label
  of these three series. (``DCGM_FI_DEV_FABRIC_MANAGER_ERROR_CODE`` is a DCGM return code, not
  NVML's: not emitted; ``falcon_gpu_fabric_status`` has NVML's.)
- ``openfalcon``: ``FabricState`` (NVML's state) and ``FabricFaults`` (how many conditions hold).
"""

from __future__ import annotations

from falcon_gpu.model.fabric import STATE_COMPLETED, FabricReading
from falcon_gpu.model.samples import Labels
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec, without_empty
from falcon_gpu.schemas.label_cache import Kept, LabelCache

P = "falcon_gpu_fabric_"
FALCON_GPU_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(P + "info", "gauge", "The GPU's NVLink fabric clique and cluster; value is always 1."),
    MetricSpec(
        P + "state",
        "gauge",
        "Fabric registration: 0 not supported, 1 not started, 2 in progress, 3 completed.",
    ),
    MetricSpec(P + "status", "gauge", "The fabric registration's NVML return code (0: success)."),
    MetricSpec(P + "health_mask", "gauge", "The fabric's health mask (NVML_GPU_FABRIC_HEALTH_MASK_*)."),
    MetricSpec(P + "fault", "gauge", "1 while the fabric reports this condition (degraded link or route)."),
)
F = "DCGM_FI_DEV_FABRIC_"
DCGM_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(
        F + "MANAGER_STATUS",
        "gauge",
        "Fabric manager status: 0 not supported, 1 not started, 2 in progress, 3 success, 4 failure.",
    ),
    MetricSpec(F + "CLIQUE_ID", "gauge", "The ID of the fabric clique to which this GPU belongs."),
    MetricSpec(F + "HEALTH_MASK", "gauge", "The GPU's fabric health mask (NVML_GPU_FABRIC_HEALTH_MASK_*)."),
)
DCGM_FAILURE = 4
"""``DcgmFMStatusFailure``: registration completed with an error status."""


class FabricLabels(Kept):
    """The fabric series' label tuples one renderer keeps (:mod:`falcon_gpu.schemas.label_cache`)."""

    __slots__ = ("dcgm", "fault", "info")

    def __init__(self) -> None:
        self.info: LabelCache[tuple[Labels, int, str], Labels] = LabelCache(
            lambda k: without_empty((*k[0], ("clique_id", str(k[1])), ("cluster_uuid", k[2])))
        )
        self.fault: LabelCache[tuple[Labels, str], Labels] = LabelCache(
            lambda k: (*k[0], ("condition", k[1]))
        )
        self.dcgm: LabelCache[tuple[Labels, str], Labels] = LabelCache(
            lambda k: without_empty((*k[0], ("DCGM_FI_DEV_FABRIC_CLUSTER_UUID", k[1])))
        )


def add_falcon_gpu(
    b: FamilyBuilder, lb: Labels, fabric: FabricReading, kept: FabricLabels, sparse: bool = False
) -> None:
    """``lb``: the GPU's labels, no empty value (from a label cache). ``sparse`` (the default
    profile): a ``fault`` series only while its condition holds."""
    b.put(P + "info", kept.info.get((lb, fabric.clique_id, fabric.cluster_uuid)), 1)
    b.put(P + "state", lb, fabric.state)
    b.put(P + "status", lb, fabric.status)
    b.put(P + "health_mask", lb, fabric.health_mask)
    for condition, holds in fabric.health:
        if holds or not sparse:
            b.put(P + "fault", kept.fault.get((lb, condition)), holds)


def dcgm_status(fabric: FabricReading) -> int:
    """DCGM's ``dcgmFabricManagerStatus_t`` of the reading (as DCGM's cache manager maps NVML's state)."""
    if fabric.state == STATE_COMPLETED and fabric.status != 0:
        return DCGM_FAILURE
    return fabric.state


def add_dcgm(b: FamilyBuilder, lb: Labels, fabric: FabricReading, kept: FabricLabels) -> None:
    labels = kept.dcgm.get((lb, fabric.cluster_uuid))
    b.put(F + "MANAGER_STATUS", labels, dcgm_status(fabric))
    b.put(F + "CLIQUE_ID", labels, fabric.clique_id)
    b.put(F + "HEALTH_MASK", labels, fabric.health_mask)


def openfalcon_items(fabric: FabricReading) -> tuple[tuple[str, int], ...]:
    """(metric, value) of the GPU's Open-Falcon items."""
    return (("FabricState", fabric.state), ("FabricFaults", len(fabric.faults)))
