"""A GPU's NVLink fabric attachment (``nvmlDeviceGetGpuFabricInfoV``): Hopper and later on NVSwitch
systems (HGX H100/H200/B200, GB200/GB300 NVL racks).

On such a system a GPU can run multi-GPU work only once the fabric manager has registered it with
the fabric (its *state* goes not started -> in progress -> completed, and *status* says whether the
registration succeeded); the *clique* is the set of GPUs that reach each other over the fabric
(within one NVL72 rack, one clique per NVLink partition), the *cluster UUID* names the fabric. The
*health mask* packs the fabric's own view of the attachment into 2-bit fields (and one 4-bit one),
each NOT_SUPPORTED (0), TRUE (1: the condition holds) or FALSE (2): bandwidth degraded (a link or
switch is down and traffic is squeezed onto the rest), route recovery in progress, route unhealthy,
access-timeout recovery in progress; and an incorrect-configuration code (0 not supported, 1 none,
2.. which misconfiguration). The layout is NVML's ``NVML_GPU_FABRIC_HEALTH_MASK_*`` (what DCGM's
``DCGM_FI_DEV_FABRIC_HEALTH_MASK`` carries too).

Values only: the NVML source decodes the struct (:mod:`falcon_gpu.sources.nvml.readers.fabric`).
"""

from __future__ import annotations

from typing import Final

import msgspec

FABRIC_STATES: Final = ("not_supported", "not_started", "in_progress", "completed")
"""``NVML_GPU_FABRIC_STATE_*`` by value (0..3)."""
STATE_COMPLETED: Final = 3

FABRIC_CONDITIONS: Final = (
    ("degraded_bandwidth", 0),
    ("route_recovery", 2),
    ("route_unhealthy", 4),
    ("access_timeout_recovery", 6),
)
"""(condition, bit offset) of the mask's 2-bit conditions (``NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_*``)."""
CONDITION_TRUE: Final = 1
CONDITION_FALSE: Final = 2
INCORRECT_CONFIGURATION_SHIFT: Final = 8
INCORRECT_CONFIGURATION_NONE: Final = 1
INCORRECT_CONFIGURATION: Final = "incorrect_configuration"


def decode_health(mask: int) -> tuple[tuple[str, bool], ...]:
    """The conditions the mask reports (those it says NOT_SUPPORTED are left out), each True while it
    holds; ``incorrect_configuration`` holds when the mask names a misconfiguration (code 2 or more)."""
    out = [
        (name, value == CONDITION_TRUE)
        for name, shift in FABRIC_CONDITIONS
        if (value := (mask >> shift) & 0x3) in (CONDITION_TRUE, CONDITION_FALSE)
    ]
    config = (mask >> INCORRECT_CONFIGURATION_SHIFT) & 0xF
    if config:
        out.append((INCORRECT_CONFIGURATION, config > INCORRECT_CONFIGURATION_NONE))
    return tuple(out)


class FabricReading(msgspec.Struct, frozen=True, gc=False):
    """One GPU's fabric attachment as NVML answered it (asked once a minute, with the slow readings)."""

    state: int
    """``NVML_GPU_FABRIC_STATE_*`` (:data:`FABRIC_STATES`): 3 once the GPU is registered."""
    status: int
    """The registration's NVML return code (0: success); meaningful once the state is completed."""
    clique_id: int
    cluster_uuid: str
    """The fabric's UUID, ``8-4-4-4-12`` lower-case hex."""
    health_mask: int | None = None
    """The raw health mask (None: the driver gave none)."""
    health: tuple[tuple[str, bool], ...] = ()
    """The mask decoded (:func:`decode_health`): each supported condition and whether it holds."""

    @property
    def registered(self) -> bool:
        """Registered with the fabric, successfully."""
        return self.state == STATE_COMPLETED and self.status == 0

    @property
    def faults(self) -> tuple[str, ...]:
        """The health conditions that hold (a degraded link or route, a misconfiguration)."""
        return tuple(name for name, holds in self.health if holds)
