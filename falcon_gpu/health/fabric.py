"""The ``fabric`` check: a GPU on an NVLink fabric (NVSwitch systems, GB200/GB300 NVL racks) that is
not registered with it, or whose fabric reports a degraded link or route, cannot run multi-GPU work at
full speed, or at all.

Fail when the registration has not completed (not started, in progress: the fabric manager is down
or still training) or completed with an error status, and when the health mask says bandwidth is
degraded, a route is unhealthy or recovering, an access-timeout recovery is in progress, or the
configuration is incorrect (the five conditions DCGM's NVLink health watch fails on). A GPU without a
fabric (``DeviceReading.fabric`` None: before Hopper, a PCIe board, NOT_SUPPORTED) has no such check.
"""

from __future__ import annotations

from falcon_gpu.model.cycle import FAIL, PASS
from falcon_gpu.model.fabric import FabricReading


def fabric_level(fabric: FabricReading) -> int:
    return PASS if fabric.registered and not fabric.faults else FAIL
