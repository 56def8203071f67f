"""Slurm job id -> the job's name (``SLURM_JOB_NAME``), read once per job from a process's environment.

Right-sizing advice groups a Slurm job's records by its name, which survives a resubmission
(a new job id): ``sbatch -J train-llm`` twice is one workload. slurmstepd puts the name in every
task's environment, so it is read from ``<proc_root>/<pid>/environ`` of one of the job's
processes, the first cycle the job is seen (procfs, no Slurm client), and kept while the job
has GPU processes: a job that is gone is forgotten with its name. An environment that cannot be
read (another user's process without ``CAP_SYS_PTRACE``, a process that just ended) or names no
job gives None, also kept, so it is not read again every cycle; the advice then names the
workload by the job id. Bounded at :data:`MAX_JOBS` jobs (oldest first).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from pathlib import Path

from falcon_gpu.attribution.slurm_cgroup import SlurmStep

MAX_JOBS = 4096
MAX_ENVIRON_BYTES = 1 << 20
"""How much of an environment is read: the job's user writes it, so a huge one costs the agent at
most this much once per job (the name is near the start: slurmstepd sets it before the user's)."""
MAX_NAME = 256
"""Characters of a job name kept: it becomes a label value, which the job's user chooses."""
_KEY = b"SLURM_JOB_NAME="


def read_job_name(proc_root: Path, pid: int) -> str | None:
    """``SLURM_JOB_NAME`` from the NUL-separated ``/proc/<pid>/environ``; None if unreadable or absent."""
    try:
        with (proc_root / str(pid) / "environ").open("rb") as f:
            data = f.read(MAX_ENVIRON_BYTES)
    except OSError:
        return None
    for entry in data.split(b"\0"):
        if entry.startswith(_KEY):
            name = entry[len(_KEY) :].decode("utf-8", errors="replace").strip()[:MAX_NAME]
            return name or None
    return None


class SlurmNames:
    """The names of the Slurm jobs with GPU processes now, owned by the attribution stage."""

    def __init__(self, proc_root: Path, *, max_jobs: int = MAX_JOBS) -> None:
        self._proc_root = proc_root
        self._max = max_jobs
        self._names: OrderedDict[str, str | None] = OrderedDict()
        self.reads = 0
        """environ files read so far (for tests: one per new job, not one per cycle)."""

    def update(self, steps: Mapping[int, SlurmStep | None]) -> Mapping[str, str | None]:
        """This cycle's (PID -> Slurm step) of the processes in no pod: reads the name of each job
        not seen before, forgets the jobs with no process now, and answers job id -> name."""
        seen: dict[str, int] = {}
        for pid, step in steps.items():
            if step is not None:
                seen.setdefault(step.job, pid)
        for job, pid in seen.items():
            if job not in self._names:
                self.reads += 1
                self._names[job] = read_job_name(self._proc_root, pid)
        self._retain(seen)
        return self._names

    def _retain(self, jobs: Iterable[str]) -> None:
        keep = set(jobs)
        for job in [j for j in self._names if j not in keep]:
            del self._names[job]
        while len(self._names) > self._max:
            self._names.popitem(last=False)
