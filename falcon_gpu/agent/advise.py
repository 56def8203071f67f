"""``falcon-gpu advise``: per workload, the smallest placement that would have held it.

Reads this node's job records under ``jobs_dir`` (finished jobs) and the running agent's saved
open jobs (running work, with their p95s so far), then runs one cycle of the agent's own source
and attribution (``--simulate`` works as for ``top``) for three things the files lack: the GPU
models' MIG profiles (from NVML), the GPUs' memory sizes, and running containers no agent is
following (one sample each). NVML failing costs only the profiles: the records are still
advised on, in time-sliced shares and whole GPUs, and stderr says why. A Slurm job's workload
(its name, :mod:`falcon_gpu.attribution.slurm_names`) is listed as ``slurm:<name>``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TextIO

from falcon_gpu.advice.profiles import MigProfile
from falcon_gpu.advice.summary import advise, gpus_freed
from falcon_gpu.jobs.open_job import JobKey, OpenJob
from falcon_gpu.jobs.records_file import JobLog
from falcon_gpu.jobs.state import StateFile
from falcon_gpu.jobs.stats import select
from falcon_gpu.jobs.tracker import uses
from falcon_gpu.model.advice import Advice
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.jobs import JobRecord
from falcon_gpu.settings import Settings

COLUMNS = ("NAMESPACE/WORKLOAD", "PODS", "PEAK", "P95", "SM95", "RAN", "ADVICE")
GIB = 1 << 30


class Live:
    """What one cycle of the agent's source adds to the records."""

    def __init__(self) -> None:
        self.profiles: dict[str, tuple[MigProfile, ...]] = {}
        self.memory_total: dict[str, int] = {}
        self.running: list[JobRecord] = []
        self.problem: str | None = None


def live_cycle(settings: Settings, simulate: str | None, followed: set[JobKey]) -> Live:
    """One cycle; ``followed``: the keys of the jobs the agent's saved state has."""
    from falcon_gpu.agent.commands import _prepare_one_shot, _runner
    from falcon_gpu.agent.runtime import build as build_runtime

    live = Live()
    rt = build_runtime(settings, simulate=simulate, with_sinks=False, one_shot=True)
    try:
        _prepare_one_shot(rt)
        cycle = _runner(rt, step=max(1, round(settings.interval))).run().cycle
        if not cycle.snapshot.nvml_ok:
            live.problem = f"NVML: {cycle.snapshot.nvml_error or 'unavailable'}"
            return live
        live.profiles = rt.source.mig_profiles(cycle.snapshot)
        for dev in cycle.snapshot.devices:
            if dev.memory_total_bytes:
                live.memory_total.setdefault(dev.name, dev.memory_total_bytes)
        live.running = _unfollowed(cycle, settings.node, followed)
    finally:
        rt.close(1.0)
    return live


def _unfollowed(cycle: CycleData, node: str, followed: set[JobKey]) -> list[JobRecord]:
    """A one-sample job for each running container (or Slurm job) the saved state does not have."""
    devices = {d.uuid: d for d in cycle.snapshot.devices}
    out = []
    for key, use in uses(cycle.attribution):
        dev = devices.get(use.gpu_uuid)
        if use.processes <= 0 or dev is None or key in followed:
            continue
        now = cycle.snapshot.timestamp
        job = OpenJob.first_seen(key, node, use, dev, now)
        util = None if use.utilization_ratio is None else min(1.0, use.utilization_ratio)
        job.sample(now, use.memory_used_bytes, util, None)
        out.append(job.close())
    return out


def _gib(n: int) -> str:
    return f"{n / GIB:.1f}G"


def _span(seconds: float) -> str:
    s = round(seconds)
    if s >= 86400:
        return f"{s // 86400}d{s % 86400 // 3600:02d}h"
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s"


def _name(a: Advice) -> str:
    """``namespace/workload``; a Slurm workload (no namespace) ``slurm:<job name>``."""
    return f"{a.namespace}/{a.workload}" if a.namespace else f"slurm:{a.workload}"


def _row(a: Advice) -> tuple[str, ...]:
    sm = "-" if a.sm_p95_ratio is None else f"{a.sm_p95_ratio * 100:.0f}%"
    return (
        (f"{a.namespace}/{a.workload}" if a.namespace else f"slurm:{a.workload}")
        + (" *" if a.running else ""),
        str(a.pods),
        _gib(a.memory_peak_bytes),
        _gib(a.memory_p95_bytes),
        sm,
        _span(a.duration_seconds),
        a.placement.name,
    )


def table(advice: list[Advice], width: int = 80) -> str:
    """Readable at 80 columns: the workload column is cut (with "~") before anything else."""
    rows = [COLUMNS, *(_row(a) for a in advice)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    spare = width - (sum(widths) + 2 * (len(COLUMNS) - 1))
    if spare < 0:
        widths[0] = max(len(COLUMNS[0]), widths[0] + spare)
    lines = []
    for r in rows:
        cells = [c if len(c) <= w else c[: w - 1] + "~" for c, w in zip(r, widths, strict=True)]
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
    return "\n".join(lines)


def _by_model(advice: list[Advice]) -> list[str]:
    lines = []
    for model in sorted({a.model for a in advice}):
        mine = [a for a in advice if a.model == model]
        smaller = [a for a in mine if a.recommended < a.held]
        freed = gpus_freed(mine)
        lines.append(f"{model}: {len(smaller)} of {len(mine)} workloads fit smaller; {freed} GPUs freed")
    return lines


def advise_command(
    settings: Settings,
    *,
    simulate: str | None,
    namespace: str | None,
    since: float | None,
    headroom: float | None = None,
    as_json: bool = False,
    out: TextIO = sys.stdout,
) -> int:
    """Print the advice; 0 even when there is nothing to advise on (the output says so)."""
    jobs_dir: Path = settings.jobs_dir
    now = time.time()
    finished = select(JobLog(jobs_dir).read(), namespace=namespace, pod=None, since=since, now=now)
    saved = _open_jobs(jobs_dir)
    open_jobs = [j.close() for j in saved]
    followed = {j.key for j in saved}
    live = live_cycle(settings, simulate, followed)
    if live.problem:
        print(f"falcon-gpu: advise: {live.problem}; no MIG profiles, advising shares and whole GPUs",
              file=sys.stderr)  # fmt: skip
    running = [r for r in (*open_jobs, *live.running) if namespace is None or r.namespace == namespace]
    room = settings.advice_headroom if headroom is None else headroom
    advice = advise(
        [*((r, False) for r in finished), *((r, True) for r in running)],
        live.profiles,
        live.memory_total,
        room,
    )
    if as_json:
        body = {
            "headroom": room,
            "workloads": [a.as_json() for a in advice],
            "gpus_freed": gpus_freed(advice),
            "mig_profiles": {m: [p.as_json() for p in ps] for m, ps in sorted(live.profiles.items())},
        }
        out.write(json.dumps(body, indent=2) + "\n")
        return 0
    if not advice:
        out.write(f"no job records{' matching' if namespace or since else ''} under {jobs_dir}\n")
        return 0
    out.write(table(advice) + "\n\n")
    for line in _by_model(advice):
        out.write(line + "\n")
    freed = gpus_freed(advice)
    out.write(f"headroom {room:.0%}; * running now; GPUs freed if every advice were taken: {freed}\n")
    return 0


def _open_jobs(jobs_dir: Path) -> list[OpenJob]:
    return StateFile(jobs_dir).load()[0] if jobs_dir.is_dir() else []
