"""Builders for the NVML source tests: sources on scenarios, a quirk-injecting library
wrapper, a fake clock, and the readings a scenario should produce (computed from the
scenario itself, independently of the simulator's NVML units)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pynvml

from falcon_gpu.model.fabric import FabricReading
from falcon_gpu.model.snapshot import EccCounts, GpmReading, RemappedRows, RetiredPages
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.readings.device import READINGS
from falcon_gpu.readings.spec import Reading
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.simulator.scenario.model import GPM_KEYS
from falcon_gpu.simulator.scenario.parse import (
    GpuScenario,
    Scenario,
    Series,
    at,
    load_scenario,
    parse_scenario,
    resolve_scenario,
)
from falcon_gpu.sources.nvml.source import NvmlSource

GIB = 1 << 30


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Quirky:
    """A pynvml stand-in that delegates to a SimulatedNvml, minus ``hide`` (AttributeError,
    like an old binding) and with ``override`` functions in place of the simulator's."""

    def __init__(
        self,
        sim: SimulatedNvml,
        hide: tuple[str, ...] = (),
        override: dict[str, Callable[..., Any]] | None = None,
    ) -> None:
        self.sim = sim
        self.hide = set(hide)
        self.override = dict(override or {})
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        if name in self.hide:
            raise AttributeError(name)
        if name in self.override:
            self.calls[name] = self.calls.get(name, 0) + 1
            return self.override[name]
        return getattr(self.sim, name)


def raising(code: int) -> Callable[..., Any]:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise pynvml.NVMLError(code)

    return fn


def scenario_named(name: str) -> Scenario:
    return load_scenario(resolve_scenario(name))


def scenario_of(*gpus: dict[str, object]) -> Scenario:
    return parse_scenario({"gpus": list(gpus)})


def gpu(uuid: str = "GPU-a", **extra: object) -> dict[str, object]:
    out: dict[str, object] = {"uuid": uuid, "name": "NVIDIA A100-SXM4-40GB", "pci_bus_id": "00000000:07:00.0"}
    out.update(extra)
    return out


def source_on(
    lib: Any, clock: Callable[[], float] | None = None, **kwargs: Any
) -> tuple[NvmlSource, Telemetry]:
    telemetry = Telemetry()
    source = NvmlSource(lib, telemetry, clock=clock or FakeClock(), **kwargs)
    return source, telemetry


_PLAIN = tuple(r for r in READINGS if r.sim is not None)
"""The table readings a scenario key gives directly (its value, converted to the base unit)."""
_JOINT = frozenset(
    r.field for r in _PLAIN if r.nvml is not None and r.nvml.call == "nvmlDeviceGetUtilizationRates"
)
"""Members of one struct answer: all absent when any key is (the call fails as a whole)."""


def _plain(gpu: GpuScenario, reading: Reading, cycle: int) -> float | None:
    assert reading.sim is not None
    sim = reading.sim
    values = gpu.values if sim.group is None else getattr(gpu, sim.group)
    series = None if values is None else values.get(sim.key)
    if series is None or not gpu.supports(sim.support_name):
        return None
    return reading.type(reading.sim_to_base(at(series, cycle)))


def expected_device(gpu: GpuScenario, cycle: int) -> dict[str, Any]:
    """The DeviceReading fields a scenario GPU must yield at ``cycle``, in base units: the table's
    readings from their scenario keys (independently of the simulator's NVML units), and the rest."""
    out: dict[str, Any] = {"uuid": gpu.uuid, "name": gpu.name, "pci_bus_id": gpu.pci_bus_id}
    out.update({r.field: _plain(gpu, r, cycle) for r in _PLAIN})
    if any(out[f] is None for f in _JOINT):
        out.update(dict.fromkeys(_JOINT))
    total, used, reserved = (out[f"memory_{k}_bytes"] for k in ("total", "used", "reserved"))
    out["memory_free_bytes"] = None if None in (total, used, reserved) else total - used - reserved
    out["inforom_valid"] = gpu.inforom_valid if gpu.supports("inforom") else None
    out["mig_enabled"] = bool(gpu.mig)
    out["fabric"] = expected_fabric(gpu, cycle)
    ecc = gpu.ecc if gpu.supports("ecc") else None
    out["ecc"] = (
        None
        if ecc is None
        else EccCounts(
            *(
                None if s is None else int(at(s, cycle))
                for s in (
                    ecc.corrected_volatile,
                    ecc.uncorrected_volatile,
                    ecc.corrected_aggregate,
                    ecc.uncorrected_aggregate,
                )
            )
        )
    )
    pages = gpu.retired_pages if gpu.supports("retired_pages") else None
    out["retired_pages"] = (
        None
        if pages is None
        else RetiredPages(int(at(pages.single_bit, cycle)), int(at(pages.double_bit, cycle)), pages.pending)
    )
    rows = gpu.remapped_rows if gpu.supports("remapped_rows") else None
    out["remapped_rows"] = (
        None
        if rows is None
        else RemappedRows(
            int(at(rows.correctable, cycle)), int(at(rows.uncorrectable, cycle)), rows.pending, rows.failed
        )
    )
    reasons = gpu.clock_event_reasons if gpu.supports("clock_event_reasons") else None
    out["clock_event_reasons"] = None if reasons is None else frozenset(reasons)
    out["gpm"] = expected_gpm(gpu.gpm if gpu.supports("gpm") else None, cycle)
    links = gpu.nvlink if gpu.supports("nvlink") else ()
    for key in ("tx_bytes", "rx_bytes"):
        known = [int(at(s, cycle) / 1024) * 1024 for n in links if (s := getattr(n, key)) is not None]
        out[f"nvlink_{key}"] = sum(known) if known else None
    return out


def expected_fabric(gpu: GpuScenario, cycle: int) -> FabricReading | None:
    """The fabric reading of a scenario GPU at ``cycle`` (the mask decoded by NVML's layout, here)."""
    fabric = gpu.fabric if gpu.supports("fabric") else None
    if fabric is None or at(fabric.state, cycle) == 0:
        return None
    mask = fabric.health_mask
    names = ("degraded_bandwidth", "route_recovery", "route_unhealthy", "access_timeout_recovery")
    health = [(name, (mask >> 2 * i) & 3 == 1) for i, name in enumerate(names) if (mask >> 2 * i) & 3]
    if (mask >> 8) & 0xF:
        health.append(("incorrect_configuration", (mask >> 8) & 0xF > 1))
    raw = fabric.cluster_uuid.hex()
    cluster = f"{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}"
    state = int(at(fabric.state, cycle))
    return FabricReading(state, fabric.status, fabric.clique_id, cluster, mask, tuple(health))


def expected_gpm(gpm: dict[str, Series] | None, cycle: int) -> GpmReading | None:
    """A device's or instance's GPM reading at ``cycle``: absent on cycle 0 (one sample only)."""
    if gpm is None or cycle == 0:
        return None
    return GpmReading(*(None if (s := gpm.get(k)) is None else at(s, cycle) / 100 for k in GPM_KEYS))


def expected_processes(gpu: GpuScenario, cycle: int) -> dict[tuple[int, int | None], dict[str, Any]]:
    """(pid, gpu instance) -> name, types, memory, SM ratio; the SM share needs process
    utilisation support (one sample per cycle, so the average is that cycle's value)."""
    sampled = gpu.supports("process_utilization") and not gpu.mig  # NVML: none on MIG-enabled GPUs
    out: dict[tuple[int, int | None], dict[str, Any]] = {}
    groups = [(None, gpu.processes, None)] + [
        (m.gpu_instance_id, m.processes,
         expected_gpm(m.gpm if gpu.gpm is not None and gpu.supports("gpm") else None, cycle))
        for m in gpu.mig
    ]  # fmt: skip
    for gi, procs, gpm in groups:
        memory = {
            p.pid: 0 if p.used_memory_bytes is None else int(at(p.used_memory_bytes, cycle)) for p in procs
        }
        for p in procs:
            instance_share = None  # on MIG: the instance's GPM SM activity, split by memory
            if gpm is not None and gpm.sm_active is not None:
                total = sum(memory.values())
                instance_share = gpm.sm_active * (memory[p.pid] / total if total else 1 / len(procs))
            out[(p.pid, gi)] = {
                "name": p.name,
                "types": p.types,
                "used_memory_bytes": None
                if p.used_memory_bytes is None
                else int(at(p.used_memory_bytes, cycle)),
                "sm_util_ratio": instance_share
                if p.sm_util_percent is None or not sampled
                else at(p.sm_util_percent, cycle) / 100,
            }
    return out
