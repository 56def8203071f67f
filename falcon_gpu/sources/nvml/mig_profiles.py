"""Each GPU model's MIG profiles, read once per GPU from NVML (they never change).

``nvmlDeviceGetGpuInstanceProfileInfo`` for every ``NVML_GPU_INSTANCE_PROFILE_*`` index: memory,
slices and SMs per profile, the name where the binding's struct carries one (v2). NVML answers
NOT_SUPPORTED for a profile the GPU does not have, and for every profile where MIG mode is off
(so a node whose GPUs of a model all run without MIG knows no profiles for it: the advice then
offers time-sliced shares and whole GPUs only). Not part of the per-cycle readers: only
``falcon-gpu advise`` asks, once per GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pynvml

from falcon_gpu.advice.profiles import MigProfile, profile_name
from falcon_gpu.model.snapshot import DeviceReading
from falcon_gpu.sources.nvml.calls import ABSENT, NvmlCaller

_FN = "nvmlDeviceGetGpuInstanceProfileInfo"
_NOT_A_PROFILE = {pynvml.NVML_ERROR_NOT_SUPPORTED: ABSENT, pynvml.NVML_ERROR_INVALID_ARGUMENT: ABSENT}
"""Answers, not failures: no such profile here (or MIG off). Nothing is marked or logged."""


def read_profiles(nvml: NvmlCaller, scope: str, handle: Any) -> tuple[MigProfile, ...]:
    count = int(getattr(nvml.lib, "NVML_GPU_INSTANCE_PROFILE_COUNT", 0) or 0)
    found = []
    for index in range(count):
        info = nvml.call(scope, "mig_profiles", _FN, handle, index, answers=_NOT_A_PROFILE)
        if info is ABSENT:
            continue
        memory_mib = int(info.memorySizeMB)
        slices = int(info.sliceCount)
        if slices <= 0 or memory_mib <= 0:
            continue
        found.append(
            MigProfile(
                profile_id=index,
                name=profile_name(getattr(info, "name", None), slices, memory_mib),
                slices=slices,
                memory_bytes=memory_mib << 20,
                multiprocessors=int(info.multiprocessorCount),
                instances=int(info.instanceCount),
            )
        )
    return tuple(found)


class MigProfiles:
    """Per GPU model, the profiles of the first of its GPUs that answered any; each GPU asked once."""

    def __init__(self, nvml: NvmlCaller) -> None:
        self._nvml = nvml
        self._asked: set[str] = set()
        self._by_model: dict[str, tuple[MigProfile, ...]] = {}

    def by_model(
        self, devices: Iterable[DeviceReading], handle_of: Callable[[int], Any]
    ) -> dict[str, tuple[MigProfile, ...]]:
        for dev in devices:
            if not dev.up or dev.uuid in self._asked or self._by_model.get(dev.name):
                continue
            self._asked.add(dev.uuid)
            handle = handle_of(dev.index)
            if handle is not None and (found := read_profiles(self._nvml, f"gpu{dev.index}", handle)):
                self._by_model[dev.name] = found
        return dict(self._by_model)
