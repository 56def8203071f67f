"""What each GPU must read as, worked out independently of the agent.

On the mock: from the profile YAML the test itself parsed (and wrote), never from the agent's
output. On a real driver (``FALCON_GPU_TEST_NVML_LIB`` without the mock): from pynvml asked
directly in a process of its own (identity, memory total, power limit, ECC aggregates); what moves
between two readings (temperature, power draw, clocks) is then left unchecked (None).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

from tests.real_nvml import mock

MIB = 1024 * 1024


class Gpu(NamedTuple):
    index: int
    uuid: str
    name: str
    pci_bus_id: str
    """As NVML spells it (``00000000:1A:00.0``: the domain in 8 digits)."""
    lost: bool = False
    memory_total: int | None = None
    memory_used: int | None = None
    memory_free: int | None = None
    memory_reserved: int | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None
    energy_joules: float | None = None
    temperature: float | None = None
    memory_temperature: float | None = None
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    utilization: float | None = None
    """0..1."""
    memory_utilization: float | None = None
    ecc_volatile: tuple[int, int] | None = None
    """(corrected, uncorrected) volatile totals."""
    ecc_aggregate: tuple[int, int] | None = None
    ecc_uncorrectable: bool = False
    """``failure.mode: ecc_uncorrectable``: the mock counts up from the trip (only > 0 is known)."""
    processes: tuple[tuple[int, int], ...] | None = None
    """(pid, used bytes) of each process (None: not known, as on a real driver)."""
    dynamic: frozenset[str] = frozenset()
    """Readings the profile makes move (``dynamic_metrics``): checked against a range instead."""
    config: dict[str, Any] | None = None
    """The merged device config (mock only)."""


def _per(value: float | None, unit: float) -> float | None:
    """``value`` (a key the profile may leave out: then unchecked) in ``unit``s."""
    return None if value is None else value / unit


def bus_id(yaml_bus_id: str) -> str:
    domain, _, rest = yaml_bus_id.partition(":")
    return f"{int(domain, 16):08X}:{rest.upper()}"


def _ecc(cfg: dict[str, Any], scope: str) -> tuple[int, int]:
    errors = cfg["ecc"]["errors"][scope]
    return int(errors["single_bit"]["total"]), int(errors["double_bit"]["total"])


def from_profile(profile: dict[str, Any]) -> list[Gpu]:
    """Each GPU of a mock profile as the YAML says it reads."""
    gpus = []
    for override in profile["devices"]:
        i = override["index"]
        cfg = mock.device_config(profile, i)
        failure = (cfg.get("failure") or {}).get("mode", "healthy")
        mem, power, thermal, clocks = cfg["memory"], cfg["power"], cfg["thermal"], cfg["clocks"]
        util = cfg.get("utilization") or {}
        dynamic = frozenset((cfg.get("dynamic_metrics") or {}).keys() - {"seed"})
        gpus.append(
            Gpu(
                index=i,
                uuid=override["uuid"],
                name=cfg["name"],
                pci_bus_id=bus_id(override["pci"]["bus_id"]),
                lost=failure in ("lost", "fallen_off_bus"),
                memory_total=int(mem["total_bytes"]),
                memory_used=int(mem.get("used_bytes", 0)),
                memory_free=int(mem["free_bytes"]),
                memory_reserved=int(mem.get("reserved_bytes", 0)),
                power_watts=power["current_draw_mw"] / 1000,
                power_limit_watts=power["enforced_limit_mw"] / 1000,
                energy_joules=_per(power.get("total_energy_consumption_mj"), 1000),
                temperature=float(thermal["temperature_gpu_c"]),
                memory_temperature=float(thermal["temperature_memory_c"]),
                sm_clock_mhz=float(clocks["sm_current"]),
                memory_clock_mhz=float(clocks["memory_current"]),
                utilization=util.get("gpu", 0) / 100,
                memory_utilization=util.get("memory", 0) / 100,
                ecc_volatile=_ecc(cfg, "volatile"),
                ecc_aggregate=_ecc(cfg, "aggregate"),
                ecc_uncorrectable=failure == "ecc_uncorrectable",
                processes=tuple(
                    (int(p["pid"]), int(p["used_memory_mib"]) * MIB) for p in cfg.get("processes") or ()
                ),
                dynamic=dynamic,
                config=cfg,
            )
        )
    return gpus


_PROBE = """
import json, pynvml as n
n.nvmlInit()
out = []
for i in range(n.nvmlDeviceGetCount()):
    h = n.nvmlDeviceGetHandleByIndex(i)
    def ask(fn, *a):
        try:
            return fn(h, *a)
        except n.NVMLError:
            return None
    mem = ask(n.nvmlDeviceGetMemoryInfo)
    limit = ask(n.nvmlDeviceGetEnforcedPowerLimit)
    out.append({"index": i, "uuid": n.nvmlDeviceGetUUID(h), "name": n.nvmlDeviceGetName(h),
                "pci_bus_id": n.nvmlDeviceGetPciInfo(h).busId,
                "memory_total": mem.total if mem else None,
                "power_limit_watts": limit / 1000 if limit is not None else None})
print(json.dumps(out))
"""


def from_driver(lib_dir: Path) -> list[Gpu]:
    """Each GPU of a real driver as pynvml, asked directly, says it reads."""
    env = mock.environment(lib_dir, None)
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True)
    return [Gpu(**{k: v for k, v in g.items() if v is not None}) for g in json.loads(done.stdout)]
