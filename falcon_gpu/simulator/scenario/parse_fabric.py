"""A GPU's ``fabric`` key: its NVLink fabric attachment, in words, encoded as NVML encodes it.

``{"state": "completed", "status": 0, "clique_id": 1, "cluster_uuid": "<uuid>", "health": {...}}``:
``state`` one of :data:`STATES` (or a list of them, one per cycle), ``status`` the registration's
NVML return code (default 0), ``health`` the fabric's conditions, each true while it holds
(``degraded_bandwidth``, ``route_recovery``, ``route_unhealthy``, ``access_timeout_recovery``: default
false) and ``incorrect_configuration`` by name (:data:`INCORRECT_CONFIGURATIONS`, default ``none``);
the simulator answers them as ``nvmlDeviceGetGpuFabricInfoV``'s health mask.
"""

from __future__ import annotations

from typing import Final

from falcon_gpu.model.fabric import (
    CONDITION_FALSE,
    CONDITION_TRUE,
    FABRIC_CONDITIONS,
    FABRIC_STATES,
    INCORRECT_CONFIGURATION,
    INCORRECT_CONFIGURATION_SHIFT,
)
from falcon_gpu.simulator.scenario.model import FabricScenario
from falcon_gpu.simulator.scenario.strict_json import Obj, ScenarioError

STATES: Final = FABRIC_STATES
INCORRECT_CONFIGURATIONS: Final = (
    "not_supported", "none", "incorrect_sysguid", "incorrect_chassis_sn", "no_partition",
    "insufficient_nvlinks", "incompatible_gpu_fw", "invalid_location", "gpu_state_invalid",
)  # fmt: skip
"""``NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_*`` by value (0..8)."""


def _state(o: Obj) -> tuple[float, ...]:
    raw = o.raw("state")
    names = [raw] if isinstance(raw, str) else raw if raw is not None else ["completed"]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n in STATES for n in names):
        raise ScenarioError(f"{o.sub('state')}: expected one of {', '.join(STATES)} or a list of them")
    return tuple(float(STATES.index(n)) for n in names)


def _uuid(o: Obj) -> bytes:
    text = o.string("cluster_uuid", "00000000-0000-0000-0000-000000000000")
    try:
        raw = bytes.fromhex(text.replace("-", ""))
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise ScenarioError(f"{o.sub('cluster_uuid')}: expected a UUID (32 hex digits), got {text!r}")
    return raw


def _mask(h: Obj | None) -> int:
    mask = 0
    for name, shift in FABRIC_CONDITIONS:
        holds = h is not None and h.boolean(name, False)
        mask |= (CONDITION_TRUE if holds else CONDITION_FALSE) << shift
    config = "none" if h is None else h.string(INCORRECT_CONFIGURATION, "none")
    if config not in INCORRECT_CONFIGURATIONS:
        assert h is not None
        raise ScenarioError(
            f"{h.sub(INCORRECT_CONFIGURATION)}: expected one of {', '.join(INCORRECT_CONFIGURATIONS)}"
        )
    if h is not None:
        h.done()
    return mask | INCORRECT_CONFIGURATIONS.index(config) << INCORRECT_CONFIGURATION_SHIFT


def parse_fabric(o: Obj) -> FabricScenario:
    fabric = FabricScenario(
        state=_state(o),
        status=o.integer("status", 0),
        clique_id=o.integer("clique_id", 0),
        cluster_uuid=_uuid(o),
        health_mask=_mask(o.obj("health")),
    )
    o.done()
    return fabric
