"""One snapshot's devices, indexed for the join: which device key a kubelet device
ID or an NVML process lands on.

A *device key* is ``(gpu_uuid, mig_uuid | None)``: the physical GPU, or one MIG
instance on it. Processes on a MIG GPU carry their GPU/compute instance IDs;
the instance's own process list is preferred, the parent's list (filtered by
instance ID) is the fallback, and a process matching no instance stays on the
physical GPU, so every process is placed exactly once.

GKE's ``nvidia<N>`` names the device node ``/dev/nvidia<N>``, whose minor number
is not always the NVML index (NVML orders by PCI bus, the kernel by probe order):
it is matched against the minor NVML reports, the index only when NVML gave none.
"""

from __future__ import annotations

from falcon_gpu.attribution.device_ids import DeviceRef, dra_profile
from falcon_gpu.model.snapshot import DeviceReading, ProcessReading, Snapshot

DeviceKey = tuple[str, str | None]


class DeviceIndex:
    def __init__(self, snapshot: Snapshot) -> None:
        self.devices = snapshot.devices
        self._by_uuid: dict[str, DeviceReading] = {}
        self._by_node: dict[int, DeviceReading] = {}
        self._mig_parent: dict[str, str] = {}
        self._mig_by_gi: dict[tuple[str, int], str] = {}
        self._mig_by_profile: dict[tuple[str, str], list[str]] = {}
        self._mig_by_placement: dict[tuple[str, str, int], str] = {}
        self._placed_profiles: set[tuple[str, str]] = set()
        for dev in snapshot.devices:
            self._by_uuid[dev.uuid] = dev
            self._by_node[dev.index if dev.minor_number is None else dev.minor_number] = dev
            for mig in dev.mig:
                self._mig_parent[mig.uuid] = dev.uuid
                self._mig_by_gi.setdefault((dev.uuid, mig.gpu_instance_id), mig.uuid)
                profile = dra_profile(mig.profile)
                same = self._mig_by_profile.setdefault((dev.uuid, profile), [])
                if mig.uuid not in same:
                    same.append(mig.uuid)
                if mig.placement_start is not None:
                    self._mig_by_placement.setdefault((dev.uuid, profile, mig.placement_start), mig.uuid)
                    self._placed_profiles.add((dev.uuid, profile))

    def resolve(self, ref: DeviceRef) -> DeviceKey | None:
        """The device key a kubelet device names; None when this node's NVML does not see it."""
        if ref.mig_uuid is not None:
            parent = self._mig_parent.get(ref.mig_uuid)
            return (parent, ref.mig_uuid) if parent is not None else None
        dev: DeviceReading | None = None
        if ref.gpu_uuid is not None:
            dev = self._by_uuid.get(ref.gpu_uuid)
        elif ref.gpu_index is not None:
            dev = self._by_node.get(ref.gpu_index)
        if dev is None:
            return None
        if ref.mig_profile is not None:
            return self._dra_mig(dev.uuid, ref.mig_profile, ref.mig_placement)
        if ref.gpu_instance_id is None:
            return (dev.uuid, None)
        mig_uuid = self._mig_by_gi.get((dev.uuid, ref.gpu_instance_id))
        return (dev.uuid, mig_uuid) if mig_uuid is not None else None

    def _dra_mig(self, gpu_uuid: str, profile: str, placement: int | None) -> DeviceKey | None:
        """A DRA MIG device by profile and placement start. Where NVML gave this profile's
        placements, only the instance at that placement matches; where it gave none (an
        unprivileged agent), only an instance whose profile is unique on the GPU."""
        if (gpu_uuid, profile) in self._placed_profiles:
            found = (
                self._mig_by_placement.get((gpu_uuid, profile, placement)) if placement is not None else None
            )
            return (gpu_uuid, found) if found is not None else None
        same = self._mig_by_profile.get((gpu_uuid, profile), [])
        return (gpu_uuid, same[0]) if len(same) == 1 else None


def place_processes(dev: DeviceReading) -> list[tuple[str | None, ProcessReading]]:
    """Every process of one physical GPU with the MIG instance it runs on (None: the whole GPU)."""
    if not dev.mig:
        return [(None, p) for p in dev.processes]
    placed: list[tuple[str | None, ProcessReading]] = []
    seen: set[tuple[int, str]] = set()
    for mig in dev.mig:
        for p in mig.processes:
            if (p.pid, mig.uuid) not in seen:
                seen.add((p.pid, mig.uuid))
                placed.append((mig.uuid, p))
    instances = {(m.gpu_instance_id, m.compute_instance_id): m.uuid for m in dev.mig}
    first_ci: dict[int, str] = {}
    for m in dev.mig:
        first_ci.setdefault(m.gpu_instance_id, m.uuid)
    placed_pids = {pid for pid, _ in seen}
    for p in dev.processes:
        if p.pid in placed_pids:
            continue
        mig_uuid: str | None = None
        if p.gpu_instance_id is not None:
            if p.compute_instance_id is not None:
                mig_uuid = instances.get((p.gpu_instance_id, p.compute_instance_id))
            if mig_uuid is None:
                mig_uuid = first_ci.get(p.gpu_instance_id)
        placed.append((mig_uuid, p))
    return placed
