"""Simulated process lists, process utilisation samples, MIG device and GPU instance handles.

Process lists exist in the three pynvml generations (``_v3``, ``_v2``, plain) for
compute, graphics and MPS. On a MIG GPU the parent's lists hold every instance's
processes with their instance ids, a MIG handle's list only its own (compute only).
Utilisation samples carry the µs timestamp of the cycle that produced them; a
caller whose ``lastSeen`` is at or past the newest sample gets NOT_FOUND, as from NVML.
As on a driver, the encoder and decoder work shows in the samples: the first sampled process
of a cycle carries the device's ``encoder_percent`` / ``decoder_percent`` of that cycle as its
``encUtil`` / ``decUtil``, the others 0 (a scenario with engine work but no sampled process
describes no GPU a driver reports).
A process with ``from_cycle`` / ``until_cycle`` is listed (and sampled, and named)
only in the cycles it runs.
"""

from __future__ import annotations

from typing import Any

import pynvml

from falcon_gpu.simulator.nvml import gpu_models
from falcon_gpu.simulator.nvml.core import (
    NOT_AVAILABLE_UINT,
    STAMPS_KEPT,
    NvmlStruct,
    SimCore,
    SimDevice,
    SimGpuInstance,
    SimMigDevice,
    fail,
)
from falcon_gpu.simulator.scenario.parse import ProcessScenario, at

MAX_MIG_DEVICES = 7
_GI_PROFILE_IDS = {
    1: pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE,
    2: pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE,
    3: pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE,
    4: pynvml.NVML_GPU_INSTANCE_PROFILE_4_SLICE,
    7: pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE,
}
"""GPU instance profile IDs by slice count, as ``nvmlGpuInstanceGetInfo`` reports them."""


def _info(p: ProcessScenario, cycle: int, gi: int, ci: int) -> NvmlStruct:
    used = None if p.used_memory_bytes is None else round(at(p.used_memory_bytes, cycle))
    return NvmlStruct(pid=p.pid, usedGpuMemory=used, gpuInstanceId=gi, computeInstanceId=ci)


class ProcessCalls(SimCore):
    def _list(self, handle: Any, kind: str, fn: str) -> list[NvmlStruct]:
        """A new list per call, as pynvml's; the structs in it are worked out once per cycle."""
        dev, mig = self._any(handle, fn)
        key = ("processes", kind) if mig is None else ("processes", kind, mig.mig.uuid)
        return list(self._memo(dev, key, self._listed, dev, mig, kind))

    def _listed(self, dev: SimDevice, mig: SimMigDevice | None, kind: str) -> list[NvmlStruct]:
        if not dev.gpu.supports("processes"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        c = self._now

        def running(procs: tuple[ProcessScenario, ...]) -> list[ProcessScenario]:
            return [p for p in procs if kind in p.types and p.present(c)]

        if mig is not None:
            m = mig.mig
            return [_info(p, c, m.gpu_instance_id, m.compute_instance_id) for p in running(m.processes)]
        out = [_info(p, c, NOT_AVAILABLE_UINT, NOT_AVAILABLE_UINT) for p in running(dev.gpu.processes)]
        for m in self.instances(dev):
            out += [_info(p, c, m.gpu_instance_id, m.compute_instance_id) for p in running(m.processes)]
        return out

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any) -> list[NvmlStruct]:
        return self._list(handle, "compute", "nvmlDeviceGetComputeRunningProcesses_v3")

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: Any) -> list[NvmlStruct]:
        return self._list(handle, "compute", "nvmlDeviceGetComputeRunningProcesses_v2")

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[NvmlStruct]:
        return self._list(handle, "compute", "nvmlDeviceGetComputeRunningProcesses")

    def nvmlDeviceGetGraphicsRunningProcesses_v3(self, handle: Any) -> list[NvmlStruct]:
        return self._list(handle, "graphics", "nvmlDeviceGetGraphicsRunningProcesses_v3")

    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, handle: Any) -> list[NvmlStruct]:
        return self._list(handle, "graphics", "nvmlDeviceGetGraphicsRunningProcesses_v2")

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> list[NvmlStruct]:
        return self._list(handle, "graphics", "nvmlDeviceGetGraphicsRunningProcesses")

    def nvmlDeviceGetMPSComputeRunningProcesses_v3(self, handle: Any) -> list[NvmlStruct]:
        return self._list(handle, "mps", "nvmlDeviceGetMPSComputeRunningProcesses_v3")

    def nvmlDeviceGetMPSComputeRunningProcesses_v2(self, handle: Any) -> list[NvmlStruct]:
        return self._list(handle, "mps", "nvmlDeviceGetMPSComputeRunningProcesses_v2")

    def nvmlDeviceGetMPSComputeRunningProcesses(self, handle: Any) -> list[NvmlStruct]:
        return self._list(handle, "mps", "nvmlDeviceGetMPSComputeRunningProcesses")

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        """NOT_FOUND for a PID no GPU lists (or one the scenario gives no name)."""
        self._enter("nvmlSystemGetProcessName")
        names = self._names
        if names is None:
            names = self._names = self._names_now()
            self._names_at = min(self._now, self._settles)
        name = names.get(pid)
        if name is None:
            fail(pynvml.NVML_ERROR_NOT_FOUND)
        return name

    def _names_now(self) -> dict[int, str]:
        """PID -> name of every named process running this cycle (the first GPU listing it wins)."""
        names: dict[int, str] = {}
        for dev in self._devices:
            for p in (*dev.gpu.processes, *(q for m in self.instances(dev) for q in m.processes)):
                if p.name is not None and p.present(self._now):
                    names.setdefault(p.pid, p.name)
        return names

    @staticmethod
    def _engine(dev: SimDevice, key: str, cycle: int) -> int:
        """The device's encoder or decoder percent in ``cycle`` (0 where the scenario has none)."""
        series = dev.gpu.values.get(key)
        return 0 if series is None or not dev.gpu.supports(key) else round(at(series, cycle))

    def nvmlDeviceGetProcessUtilization(self, handle: Any, timeStamp: int) -> list[NvmlStruct]:
        dev, mig = self._any(handle, "nvmlDeviceGetProcessUtilization")
        # NVML: "On MIG-enabled GPUs, querying process utilization is not currently supported."
        if mig is not None or self.mig_on(dev) or not dev.gpu.supports("process_utilization"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        now, stamps = self._now, self._stamps
        first, oldest = now + 1, max(0, now - STAMPS_KEPT + 1)
        while first > oldest:  # the cycles newer than timeStamp (stamps grow with the cycle)
            stamp = stamps.get(first - 1)
            if stamp is None or stamp <= timeStamp:
                break
            first -= 1
        if first > now:
            fail(pynvml.NVML_ERROR_NOT_FOUND)
        samples = list(self._sampled(dev, first))
        for cycle in range(first + 1, now + 1):
            samples += self._sampled(dev, cycle)
        if not samples:
            fail(pynvml.NVML_ERROR_NOT_FOUND)
        return samples

    def _sampled(self, dev: SimDevice, cycle: int) -> list[NvmlStruct]:
        """The samples of ``cycle`` (which has begun): what they say worked out the first time they
        are asked for and kept for :data:`STAMPS_KEPT` cycles with the cycle's stamp; the structs
        are built per ask. (Keeping the structs cost 5,000 processes x 64 cycles of them, 1.6 MiB a
        cycle of the agent's simulated runs, which a real node's driver holds, not the agent.)"""
        kept = dev.samples.get(cycle)
        if kept is None:
            if min(cycle, dev.settles) == dev.answers_at:  # what they say is the same as this cycle's
                rows = self._memo(dev, "samples", self._sample_rows, dev, cycle)
            else:
                rows = self._sample_rows(dev, cycle)
            kept = (self._stamps[cycle], rows)
            dev.samples.pop(cycle - STAMPS_KEPT, None)  # the usual case: asked every cycle
            if len(dev.samples) >= STAMPS_KEPT:  # asked now and then: what is out of the window
                for old in [c for c in dev.samples if c <= cycle - STAMPS_KEPT]:
                    del dev.samples[old]
            dev.samples[cycle] = kept
        stamp, rows = kept
        return [NvmlStruct(timeStamp=stamp, **row) for row in rows]

    def _sample_rows(self, dev: SimDevice, cycle: int) -> list[dict[str, int]]:
        """What each sample of ``cycle`` says but its timestamp."""
        enc, dec = self._engine(dev, "encoder_percent", cycle), self._engine(dev, "decoder_percent", cycle)
        rows = []
        for p in dev.gpu.processes:
            if p.sm_util_percent is not None and p.present(cycle):
                sm = round(at(p.sm_util_percent, cycle))
                rows.append({"pid": p.pid, "smUtil": sm, "memUtil": 0, "encUtil": enc, "decUtil": dec})
                enc = dec = 0  # the first sampled process of the cycle owns the engines' work
        return rows

    # -- MIG -----------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        dev = self._device(device, "nvmlDeviceGetMigMode")
        if not dev.gpu.supports("mig"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if self.mig_on(dev) else pynvml.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        dev = self._device(device, "nvmlDeviceGetMaxMigDeviceCount")
        if not dev.gpu.supports("mig"):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return MAX_MIG_DEVICES if self.mig_on(dev) else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> SimMigDevice:
        """The instances that exist this cycle fill slots in scenario order; the rest answer NOT_FOUND."""
        dev = self._device(device, "nvmlDeviceGetMigDeviceHandleByIndex")
        if not self.mig_on(dev) or not 0 <= index < MAX_MIG_DEVICES:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        present = self.instances(dev)
        if index >= len(present):
            fail(pynvml.NVML_ERROR_NOT_FOUND)
        return SimMigDevice(dev, index, present[index])

    def nvmlDeviceIsMigDeviceHandle(self, device: Any) -> int:
        _, mig = self._any(device, "nvmlDeviceIsMigDeviceHandle")
        return int(mig is not None)

    def _mig(self, device: Any, fn: str) -> SimMigDevice:
        _, mig = self._any(device, fn)
        if mig is None:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return mig

    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:
        return self._mig(device, "nvmlDeviceGetGpuInstanceId").mig.gpu_instance_id

    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int:
        return self._mig(device, "nvmlDeviceGetComputeInstanceId").mig.compute_instance_id

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice: Any) -> SimDevice:
        return self._mig(migDevice, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle").parent

    def nvmlDeviceGetGpuInstanceById(self, device: Any, gpuInstanceId: int) -> SimGpuInstance:
        """The GPU instance ``id`` of a physical GPU; NOT_FOUND where it has none of that ID."""
        dev = self._device(device, "nvmlDeviceGetGpuInstanceById")
        if not self.mig_on(dev):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        for mig in self.instances(dev):
            if mig.gpu_instance_id == gpuInstanceId:
                return SimGpuInstance(dev, mig)
        fail(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: int, version: int = 2) -> NvmlStruct:
        """A profile of the GPU's model (:mod:`~falcon_gpu.simulator.nvml.gpu_models`): NOT_SUPPORTED
        while MIG is off, for a model without MIG and for a profile the model lacks, as NVML answers;
        ``name`` only in the v2 struct (pynvml's default)."""
        dev = self._device(device, "nvmlDeviceGetGpuInstanceProfileInfo")
        self._check_lost(dev)
        if not 0 <= profile < pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT or version not in (1, 2):
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        found = gpu_models.mig_profiles(dev.gpu.name).get(profile)
        if found is None or not self.mig_on(dev):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        fields = {"name": found.name.encode()} if version == 2 else {}
        return NvmlStruct(
            id=profile,
            isP2pSupported=0,
            sliceCount=found.slices,
            instanceCount=found.instances,
            multiprocessorCount=found.multiprocessors,
            copyEngineCount=found.slices,
            decoderCount=0,
            encoderCount=0,
            jpegCount=0,
            ofaCount=0,
            memorySizeMB=found.memory_mib,
            **fields,
        )

    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> NvmlStruct:
        """id, profileId and placement (start: the scenario's ``placement_start``; size: the
        profile's slice count, ``3g.40gb`` -> 3); NOT_SUPPORTED where the scenario gives no start."""
        self._enter("nvmlGpuInstanceGetInfo")
        if not isinstance(gpuInstance, SimGpuInstance):
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        self._check_lost(gpuInstance.parent)
        mig = gpuInstance.mig
        if mig not in self.instances(gpuInstance.parent):
            fail(pynvml.NVML_ERROR_NOT_FOUND)  # destroyed since it was looked up
        if mig.placement_start is None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        slices = int(mig.profile.split("g", 1)[0]) if mig.profile[:1].isdigit() else 1
        return NvmlStruct(
            device=gpuInstance.parent,
            id=mig.gpu_instance_id,
            profileId=_GI_PROFILE_IDS.get(slices, 0),
            placement=NvmlStruct(start=mig.placement_start, size=slices),
        )
