"""A GPU model's MIG profiles, as NVML describes them (``nvmlDeviceGetGpuInstanceProfileInfo``).

Read from the driver (:mod:`falcon_gpu.sources.nvml.mig_profiles`), never from a table of our
own: a new GPU model or driver brings its own profiles. ``slices`` is the profile's share of the
GPU's compute slices (``sliceCount``) and ``slices_total`` the largest profile's (7 on an A100
or H100), so ``slices / slices_total`` is the share of the GPU's SMs a workload gets on it.
"""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec

_NAME = re.compile(r"(?:MIG\s+)?(\d+g\.\d+gb(?:\+\w+|-\w+)*)", re.IGNORECASE)


class MigProfile(msgspec.Struct, frozen=True, gc=False):
    profile_id: int
    """NVML's profile index (``NVML_GPU_INSTANCE_PROFILE_*``), what ``nvidia-smi mig -cgi`` takes as
    ``info.id``; kept as the index NVML was asked with."""
    name: str
    """``1g.10gb``, as ``nvidia-smi mig -lgip`` names it, without the ``MIG`` prefix."""
    slices: int
    memory_bytes: int
    multiprocessors: int
    instances: int
    """How many instances of it fit on one GPU."""

    def as_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__struct_fields__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MigProfile:
        return cls(**{k: data[k] for k in cls.__struct_fields__})


def profile_name(raw: object, slices: int, memory_mib: int) -> str:
    """NVML's own name (``"MIG 1g.10gb"`` -> ``1g.10gb``) where the binding gives it, else
    ``<slices>g.<GiB rounded up>gb``, the rule NVIDIA's names follow (9984 MiB -> ``10gb``)."""
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw or "")
    if (m := _NAME.search(text)) is not None:
        return m.group(1).lower()
    return f"{slices}g.{math.ceil(memory_mib / 1024)}gb"


def simple(profiles: tuple[MigProfile, ...]) -> tuple[MigProfile, ...]:
    """The profiles a workload can be placed on, smallest first: variants that add media engines
    (``+me``, ``+gfx``) or drop them (``-me``) hold no more memory or SMs than their plain profile."""
    plain = [p for p in profiles if "+" not in p.name and "-" not in p.name]
    return tuple(sorted(plain, key=lambda p: (p.memory_bytes, p.slices, p.profile_id)))
