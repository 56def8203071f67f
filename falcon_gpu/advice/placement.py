"""The smallest placement that would have held a workload, with headroom.

A placement must hold the workload's memory *peak* as it was (a peak that does not fit is an
out-of-memory error) and its p95 memory and p95 SM activity with ``headroom`` on top (room for
the next run to be a little bigger; SM bursts above the p95 only slow it down). Candidates,
smallest first: the GPU model's MIG profiles (memory from NVML; compute as the profile's SMs
over the whole GPU's), then time-sliced shares (1/8, 1/4, 1/2 of the GPU's memory and time),
then the whole GPU. A MIG profile as large as the GPU is the whole GPU. ``fraction`` is the
share of one GPU the placement takes (1/instances of a profile that fit on one GPU).
"""

from __future__ import annotations

import msgspec

from falcon_gpu.advice.profiles import MigProfile, simple
from falcon_gpu.model.advice import Placement

DEFAULT_HEADROOM = 0.2
SHARES = (8, 4, 2)
"""Time-sliced shares offered: 1/8, 1/4 and 1/2 of a GPU."""
WHOLE = "gpu"


class Need(msgspec.Struct, frozen=True, gc=False):
    memory_peak_bytes: int
    memory_p95_bytes: int
    sm_p95_ratio: float | None
    """Of the whole GPU; None: never measured (then compute does not limit the choice)."""


GPU = Placement(WHOLE, "gpu", 1.0)


def _fits(need: Need, headroom: float, memory: float, compute: float) -> bool:
    grow = 1.0 + headroom
    if need.memory_peak_bytes > memory or need.memory_p95_bytes * grow > memory:
        return False
    return need.sm_p95_ratio is None or need.sm_p95_ratio * grow <= compute


def smallest(
    need: Need,
    gpu_memory_bytes: int | None,
    profiles: tuple[MigProfile, ...],
    headroom: float = DEFAULT_HEADROOM,
) -> Placement:
    """The smallest placement that holds ``need``; the whole GPU when nothing smaller does (or the
    GPU's memory is unknown and the model has no MIG profiles)."""
    candidates = simple(profiles)
    full_sms = max((p.multiprocessors for p in candidates), default=0)
    full_slices = max((p.slices for p in candidates), default=0)
    for p in candidates:
        if p.slices >= full_slices:
            break  # as large as the GPU: the whole GPU, said as such
        if _fits(need, headroom, p.memory_bytes, p.multiprocessors / full_sms):
            return Placement(p.name, "mig", 1.0 / max(1, p.instances))
    if gpu_memory_bytes:
        for n in SHARES:
            if _fits(need, headroom, gpu_memory_bytes / n, 1.0 / n):
                return Placement(f"shared-1/{n}", "shared", 1.0 / n)
    return GPU


def held_fraction(mig_profile: str | None, profiles: tuple[MigProfile, ...]) -> float:
    """The share of a GPU a job held: its MIG profile's (1/instances), else the whole GPU."""
    if mig_profile is None:
        return 1.0
    short = mig_profile.removeprefix("MIG ").lower()
    found = next((p for p in profiles if p.name == short), None)
    return 1.0 / max(1, found.instances) if found is not None else 1.0
