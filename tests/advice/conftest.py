"""Run the real agent (source, attribution, job tracker) in-process over a written scenario."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from falcon_gpu.agent.commands import _prepare_one_shot, _runner
from falcon_gpu.agent.runtime import build
from falcon_gpu.schemas.render import RenderedCycle
from falcon_gpu.settings import Settings, load_settings


def settings_for(tmp_path: Path, *, pod_labels: bool = True) -> Settings:
    cfg = tmp_path / "falcon-gpu.toml"
    lines = ['node = "advice-node"', "interval = 1", f'jobs_dir = "{tmp_path / "jobs"}"',
             f'spool_dir = "{tmp_path / "spool"}"']  # fmt: skip
    if pod_labels:
        lines.append('pod_labels = ["app"]')
    cfg.write_text("\n".join(lines) + "\n")
    return load_settings(cfg)


class Ran(NamedTuple):
    name_reads: int
    """Slurm job names attribution read (``/proc/<pid>/environ`` files)."""
    last: RenderedCycle | None
    """The last cycle as the sinks got it."""


def run_cycles(settings: Settings, scenario: Path, cycles: int, *, advice: bool = False) -> Ran:
    """``cycles`` cycles of the agent with job records on, as ``run`` would (no sinks; ``advice``:
    with its advice book, as ``run`` has)."""
    rt = build(settings, simulate=str(scenario), with_sinks=False, with_jobs=True, one_shot=True)
    last = None
    try:
        _prepare_one_shot(rt)
        runner = _runner(rt, step=1, advice=advice)
        for _ in range(cycles):
            last = runner.run()
        if rt.jobs is not None:
            rt.jobs.close()
    finally:
        rt.close(1.0)
    return Ran(rt.attributor.slurm_names.reads, last)
