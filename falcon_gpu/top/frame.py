"""One frame of ``falcon-gpu top`` as plain text, from one cycle's data.

A pure function of :class:`~falcon_gpu.model.cycle.CycleData`: a row per GPU (model,
utilisation, memory, temperature, power, health), under it a row per container using it
(namespace/pod, container, its share of SM and memory, process count), then each process,
and what belongs to no pod. Columns are fixed-width so the frame reads like nvidia-smi.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from typing import TypeVar

from falcon_gpu.model.attribution import ContainerRef, PodUsage, ProcessUsage, UnattributedUsage
from falcon_gpu.model.cycle import FAIL, PASS, WARN, CycleData, HealthReport
from falcon_gpu.model.snapshot import DeviceReading

GIB = 1 << 30
HEADER = f"{'GPU':<4} {'MODEL':<28} {'UTIL':>5} {'MEMORY':>17} {'TEMP':>5} {'POWER':>13}  HEALTH"
POD_HEADER = f"     {'NAMESPACE/POD':<40} {'CONTAINER':<16} {'UTIL':>5} {'MEMORY':>9} {'PROCS':>5}"


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.0f}%"


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / GIB:.1f}"


def _memory(dev: DeviceReading) -> str:
    if dev.memory_used_bytes is None and dev.memory_total_bytes is None:
        return "-"
    return f"{_gib(dev.memory_used_bytes)}/{_gib(dev.memory_total_bytes)} GiB"


def _power(dev: DeviceReading) -> str:
    if dev.power_watts is None:
        return "-"
    limit = "" if dev.power_limit_watts is None else f"/{dev.power_limit_watts:.0f}"
    return f"{dev.power_watts:.0f}{limit} W"


def _health(dev: DeviceReading, report: HealthReport | None) -> str:
    if not dev.up:
        return f"LOST ({dev.error})" if dev.error else "LOST"
    if report is None:
        return "-"
    worst = report.overall
    if worst == PASS:
        return "ok"
    word = {WARN: "warn", FAIL: "FAIL"}.get(worst, str(worst))
    return f"{word}: " + ",".join(sorted(k for k, v in report.checks.items() if v == worst))


def _device_row(dev: DeviceReading, report: HealthReport | None) -> str:
    temp = "-" if dev.temperature_celsius is None else f"{dev.temperature_celsius:.0f}C"
    return (
        f"{dev.index:<4} {dev.name[:28]:<28} {_pct(dev.utilization_ratio):>5} {_memory(dev):>17} "
        f"{temp:>5} {_power(dev):>13}  {_health(dev, report)}"
    )


def _where(dev: DeviceReading, mig_uuid: str | None) -> str:
    for mig in dev.mig:
        if mig.uuid == mig_uuid:
            return f" [MIG {mig.profile} gi={mig.gpu_instance_id}]"
    return ""


def _pod_row(dev: DeviceReading, pod: PodUsage) -> str:
    c = pod.container
    name = f"{c.namespace}/{c.pod}{_where(dev, pod.mig_uuid)}"
    # no processes, or a MIG instance (NVML gives no per-process utilisation there): no reading
    util = _pct(pod.utilization_ratio) if pod.processes and not pod.mig_uuid else "-"
    idle = (
        "" if pod.processes or not pod.allocated else f"  allocated, idle {pod.allocation_idle_seconds:.0f}s"
    )
    return (
        f"     {name[:40]:<40} {c.container[:16]:<16} {util:>5} {_gib(pod.memory_used_bytes) + ' GiB':>9} "
        f"{pod.processes:>5}{idle}"
    )


def _process_row(proc: ProcessUsage) -> str:
    label = f"pid {proc.pid} {proc.command}"
    memory = _gib(proc.memory_used_bytes) + " GiB"
    return f"       {label[:55]:<55} {_pct(proc.utilization_ratio):>5} {memory:>9}"


def _unattributed_row(u: UnattributedUsage) -> str:
    return (
        f"     {'(not in a pod)':<57} {_pct(u.utilization_ratio):>5} "
        f"{_gib(u.memory_used_bytes) + ' GiB':>9} {u.processes:>5}"
    )


Usage = TypeVar("Usage", PodUsage, UnattributedUsage)


def _by_gpu(items: Iterable[Usage]) -> dict[str, list[Usage]]:
    found: dict[str, list[Usage]] = defaultdict(list)
    for item in items:
        found[item.gpu_uuid].append(item)
    return found


def _pod_order(u: PodUsage) -> tuple[str, str, str, str]:
    return (u.mig_uuid or "", u.container.namespace, u.container.pod, u.container.container)


def render(cycle: CycleData, *, interval: float | None = None) -> str:
    """The whole frame, ending with a newline."""
    snap = cycle.snapshot
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snap.timestamp))
    every = "" if interval is None else f"  every {interval:g}s"
    lines = [f"falcon-gpu top  node {cycle.node}  {when}{every}"]
    if not snap.nvml_ok:
        lines.append(f"NVML is not answering: {snap.nvml_error or 'unknown error'}")
        return "\n".join(lines) + "\n"
    lines[0] += f"  driver {snap.driver_version or '-'}  CUDA {snap.cuda_version or '-'}"
    pods, others = _by_gpu(cycle.attribution.pods), _by_gpu(cycle.attribution.unattributed)
    procs: dict[tuple[str, str | None, ContainerRef | None], list[ProcessUsage]] = defaultdict(list)
    for p in sorted(cycle.attribution.processes, key=lambda p: p.pid):
        procs[(p.gpu_uuid, p.mig_uuid, p.container)].append(p)
    lines += ["", HEADER]
    for dev in snap.devices:
        lines.append(_device_row(dev, cycle.health.get(dev.uuid)))
        mine = sorted(pods.get(dev.uuid, []), key=_pod_order)
        rest = [u for u in others.get(dev.uuid, []) if u.processes]
        if mine or rest:
            lines.append(POD_HEADER)
        for pod in mine:
            lines.append(_pod_row(dev, pod))
            lines += [_process_row(p) for p in procs.get((dev.uuid, pod.mig_uuid, pod.container), [])]
        for u in rest:
            lines.append(_unattributed_row(u))
            lines += [_process_row(p) for p in procs.get((dev.uuid, u.mig_uuid, None), [])]
    return "\n".join(lines) + "\n"
