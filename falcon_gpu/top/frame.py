"""One frame of ``falcon-gpu top``, from one cycle's data, laid out for a width.

A pure function of :class:`~falcon_gpu.model.cycle.CycleData` and the terminal's width: a row
per GPU (model, utilisation, memory, temperature, power, health) and, under it, the lines that
belong to it (a row per container using it: namespace/pod, container, its share of SM and
memory, process count; then each process; then what belongs to no pod). Columns are as wide as
their content, so the frame reads like nvidia-smi; where the width is short the names give way
first (cut with "…"), and no line is ever longer than the width: a wrapped line would push the
header off the screen. Which of those lines a screen of a given height shows is
:mod:`~falcon_gpu.top.view`'s job.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from falcon_gpu.model.attribution import ContainerRef, PodUsage, ProcessUsage, UnattributedUsage
from falcon_gpu.model.cycle import FAIL, PASS, WARN, CycleData, HealthReport
from falcon_gpu.model.snapshot import DeviceReading

GIB = 1 << 30
ELLIPSIS = "…"
MIN_NAME = 12  # a model or pod name is cut to no less than this before the line itself is cut
INDENT = 4  # pods sit under the GPU's model column
Kind = Literal["pod", "other", "process"]


def clip(text: str, width: int) -> str:
    """``text`` in at most ``width`` columns, cut with "…" where longer."""
    if len(text) <= width:
        return text
    return text[: width - 1] + ELLIPSIS if width > 0 else ""


@dataclass(frozen=True)
class Detail:
    """A line under a GPU: a pod row, the "not in a pod" row, or a process of either."""

    kind: Kind
    text: str


@dataclass(frozen=True)
class GpuBlock:
    row: str
    details: tuple[Detail, ...]


@dataclass(frozen=True)
class Frame:
    """The lines of one frame, each already at most ``width`` long (``row`` of a block is the
    exception the view cuts itself, after it has put its "+N pods" at the end)."""

    width: int
    title: str
    gpu_header: str
    pod_header: str
    blocks: tuple[GpuBlock, ...]
    problem: str | None = None  # NVML is not answering: no GPU, no header


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.0f}%"


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / GIB:.1f} GiB"


def _memory(dev: DeviceReading) -> str:
    if dev.memory_used_bytes is None and dev.memory_total_bytes is None:
        return "-"
    used = "-" if dev.memory_used_bytes is None else f"{dev.memory_used_bytes / GIB:.1f}"
    return f"{used}/{_gib(dev.memory_total_bytes)}"


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


def _widths(rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]


def _cells(cells: Sequence[str], widths: Sequence[int], right: Sequence[bool]) -> str:
    return " ".join(
        clip(c, w).rjust(w) if r else clip(c, w).ljust(w)
        for c, w, r in zip(cells, widths, right, strict=True)
    )


GPU_HEAD = ("GPU", "MODEL", "UTIL", "MEMORY", "TEMP", "POWER")
GPU_RIGHT = (False, False, True, True, True, True)
HEALTH_ROOM = len("FAIL: thermal,power")  # a longer health (a lost GPU's error) is cut first


def _gpu_rows(devices: Sequence[DeviceReading], health: dict[str, HealthReport], width: int) -> list[str]:
    cells = [GPU_HEAD] + [
        (
            str(dev.index),
            dev.name,
            _pct(dev.utilization_ratio),
            _memory(dev),
            "-" if dev.temperature_celsius is None else f"{dev.temperature_celsius:.0f}C",
            _power(dev),
        )
        for dev in devices
    ]
    tails = [_health(dev, health.get(dev.uuid)) for dev in devices]
    # the model gives way to the health after it: that is what an SRE reads the row for
    room = 2 + min(HEALTH_ROOM, max(map(len, tails), default=0))
    widths = _widths(cells)
    others = sum(widths) - widths[1] + len(widths) - 1
    widths[1] = min(widths[1], max(MIN_NAME, width - others - room))
    tails.insert(0, "HEALTH")
    return [f"{_cells(c, widths, GPU_RIGHT)}  {tail}" for c, tail in zip(cells, tails, strict=True)]


def _where(dev: DeviceReading, mig_uuid: str | None) -> str:
    for mig in dev.mig:
        if mig.uuid == mig_uuid:
            return f" [MIG {mig.profile} gi={mig.gpu_instance_id}]"
    return ""


POD_HEAD = ("NAMESPACE/POD", "CONTAINER", "UTIL", "MEMORY", "PROCS")
POD_RIGHT = (False, False, True, True, True)


@dataclass(frozen=True)
class _Line:
    """A line under a GPU before its columns are sized: a pod/other row has all five cells (an
    "other" row leaves the container empty and lets its name run into it); a process row has
    its label, utilisation and memory."""

    kind: Kind
    cells: tuple[str, ...]
    note: str = ""


def _pod_line(dev: DeviceReading, pod: PodUsage) -> _Line:
    c = pod.container
    # no processes, or a MIG instance (NVML gives no per-process utilisation there): no reading
    util = _pct(pod.utilization_ratio) if pod.processes and not pod.mig_uuid else "-"
    idle = "" if pod.processes or not pod.allocated else f"  idle {pod.allocation_idle_seconds:.0f}s"
    name = f"{c.namespace}/{c.pod}{_where(dev, pod.mig_uuid)}"
    return _Line("pod", (name, c.container, util, _gib(pod.memory_used_bytes), str(pod.processes)), idle)


def _process_line(proc: ProcessUsage) -> _Line:
    label = f"pid {proc.pid} {proc.command}"
    return _Line("process", (label, _pct(proc.utilization_ratio), _gib(proc.memory_used_bytes)))


def _other_line(u: UnattributedUsage) -> _Line:
    cells = ("(not in a pod)", "", _pct(u.utilization_ratio), _gib(u.memory_used_bytes), str(u.processes))
    return _Line("other", cells)


def _pod_widths(lines: Sequence[_Line], width: int) -> list[int]:
    """Column widths for the pod table: the content's, the names cut where the width is short."""
    table = [POD_HEAD] + [ln.cells for ln in lines if ln.kind != "process"]
    table += [("", "", *ln.cells[1:], "") for ln in lines if ln.kind == "process"]
    widths = _widths(table)
    widths[0] = max(len(ln.cells[0]) for ln in [_Line("pod", POD_HEAD), *lines] if ln.kind == "pod")
    others = sum(widths[2:]) + len(widths) - 1
    # a process label or "(not in a pod)" may run over the name and container columns
    span = max([len(ln.cells[0]) + 2 for ln in lines if ln.kind == "process"] + [len("(not in a pod)")])
    if span > widths[0] + 1 + widths[1]:
        widths[0] = span - 1 - widths[1]
    room = width - INDENT - others
    if widths[0] + widths[1] > room:  # the pod names give way first, then the containers
        widths[1] = min(widths[1], max(len("CONTAINER"), room - widths[0]))
        widths[0] = max(MIN_NAME, room - widths[1])
    return widths


def _pod_text(line: _Line, widths: Sequence[int], width: int) -> str:
    span = widths[0] + 1 + widths[1]
    if line.kind == "process":
        label = clip(line.cells[0], span - 2).ljust(span - 2)
        text = f"  {label} " + _cells(line.cells[1:], widths[2:4], POD_RIGHT[2:4])
    elif line.kind == "other":
        text = f"{clip(line.cells[0], span).ljust(span)} " + _cells(line.cells[2:], widths[2:], POD_RIGHT[2:])
    else:
        text = _cells(line.cells, widths, POD_RIGHT) + line.note
    return clip(" " * INDENT + text, width)


Usage = TypeVar("Usage", PodUsage, UnattributedUsage)


def _by_gpu(items: Iterable[Usage]) -> dict[str, list[Usage]]:
    found: dict[str, list[Usage]] = defaultdict(list)
    for item in items:
        found[item.gpu_uuid].append(item)
    return found


def _pod_order(u: PodUsage) -> tuple[str, str, str, str]:
    return (u.mig_uuid or "", u.container.namespace, u.container.pod, u.container.container)


def _lines_under(cycle: CycleData, dev: DeviceReading) -> list[_Line]:
    pods = sorted(_by_gpu(cycle.attribution.pods).get(dev.uuid, []), key=_pod_order)
    rest = [u for u in _by_gpu(cycle.attribution.unattributed).get(dev.uuid, []) if u.processes]
    procs: dict[tuple[str, str | None, ContainerRef | None], list[ProcessUsage]] = defaultdict(list)
    for p in sorted(cycle.attribution.processes, key=lambda p: p.pid):
        procs[(p.gpu_uuid, p.mig_uuid, p.container)].append(p)
    lines: list[_Line] = []
    for pod in pods:
        lines.append(_pod_line(dev, pod))
        lines += [_process_line(p) for p in procs.get((dev.uuid, pod.mig_uuid, pod.container), [])]
    for u in rest:
        lines.append(_other_line(u))
        lines += [_process_line(p) for p in procs.get((dev.uuid, u.mig_uuid, None), [])]
    return lines


def build(cycle: CycleData, width: int, *, interval: float | None = None) -> Frame:
    """The frame of ``cycle`` for a terminal ``width`` columns wide."""
    snap = cycle.snapshot
    # no date: at 80 columns it would cut the CUDA version off the title
    when = time.strftime("%H:%M:%S", time.localtime(snap.timestamp))
    every = "" if interval is None else f"  every {interval:g}s"
    title = f"falcon-gpu top  node {cycle.node}  {when}{every}"
    if not snap.nvml_ok:
        problem = clip(f"NVML is not answering: {snap.nvml_error or 'unknown error'}", width)
        return Frame(width, clip(title, width), "", "", (), problem)
    title += f"  driver {snap.driver_version or '-'}  CUDA {snap.cuda_version or '-'}"
    under = [_lines_under(cycle, dev) for dev in snap.devices]
    widths = _pod_widths([ln for lines in under for ln in lines], width)
    gpu_header, *rows = _gpu_rows(snap.devices, cycle.health, width)
    blocks = tuple(
        GpuBlock(row, tuple(Detail(ln.kind, _pod_text(ln, widths, width)) for ln in lines))
        for row, lines in zip(rows, under, strict=True)
    )
    pod_header = _pod_text(_Line("pod", POD_HEAD), widths, width).rstrip()
    return Frame(width, clip(title, width), clip(gpu_header, width).rstrip(), pod_header, blocks)
