"""``falcon_gpu_policy_violation{policy}`` and ``_violations_total{policy}`` per GPU (CONTRACT section 4).

Every watched GPU has both series for every policy (0 while clear), so an alert
rule on them never meets an absent series; device labels as the device series.
"""

from __future__ import annotations

from falcon_gpu.model.cycle import CycleData
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec
from falcon_gpu.schemas.falcon_gpu_device import DeviceLabelSets

SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("falcon_gpu_policy_violation", "gauge", "1 while the policy is violated on this GPU."),
    MetricSpec("falcon_gpu_policy_violations_total", "counter", "Times the policy fired on this GPU."),
)


def add_policies(b: FamilyBuilder, cycle: CycleData, devices_kept: DeviceLabelSets) -> None:
    if not cycle.policies:
        return
    devices = {d.uuid: d for d in cycle.snapshot.devices}
    for st in cycle.policies:
        dev = devices.get(st.gpu_uuid)
        if dev is None:
            continue
        lb = (*devices_kept.labels(cycle.base_labels, dev), ("policy", st.policy))
        b.add("falcon_gpu_policy_violation", lb, st.violating)
        b.add("falcon_gpu_policy_violations_total", lb, st.violations_total)
