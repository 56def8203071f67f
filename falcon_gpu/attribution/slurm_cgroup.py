"""Process -> the Slurm job step it runs in, from its cgroup (no Slurm client, no slurmd socket).

Slurm's task/cgroup and proctrack/cgroup plugins put every task in a cgroup named after
its job and step (https://slurm.schedmd.com/cgroup_v2.html, cgroups.html):

* cgroup v1: ``/slurm/uid_<uid>/job_<id>/step_<step>/task_<n>`` under each controller
  (``/slurm_<node>/…`` with several slurmd on one host);
* cgroup v2: ``/system.slice/slurmstepd.scope/job_<id>/step_<step>/user/task_<n>``
  (``<node>_slurmstepd.scope`` with several slurmd); ``…/step_<step>/slurm`` holds
  slurmstepd itself, which is not the workload.

``<step>`` is a number or ``batch``, ``extern``, ``interactive``. The v2 path carries no
uid; the caller takes it from the owner of ``/proc/<pid>``. Like the other parsers it
scans segment by segment, never raises, and prefers the v2 ``0::`` line.
"""

from __future__ import annotations

import re

import msgspec

from falcon_gpu.attribution.cgroup import first_in_cgroup

# Patterns as strings: ``re`` compiles one on its first use and keeps it (its own cache), so a
# process that never meets such a path (every plugin start on a node without them) compiles none.
_JOB = r"^job_(?P<id>[0-9]+)$"
_STEP = r"^step_(?P<step>[0-9]+|batch|extern|interactive)$"
_UID = r"^uid_(?P<uid>[0-9]+)$"


class SlurmStep(msgspec.Struct, frozen=True, gc=False):
    """A Slurm job step a process runs in; ``uid`` None where the path does not say (v2)."""

    job: str
    step: str
    uid: int | None = None


def _is_root(segment: str) -> bool:
    return segment == "slurm" or segment.startswith("slurm_") or segment.endswith("slurmstepd.scope")


def parse_slurm_path(path: str) -> SlurmStep | None:
    segments = [s for s in path.split("/") if s]
    for i, segment in enumerate(segments):
        if not _is_root(segment):
            continue
        rest = segments[i + 1 :]
        uid: int | None = None
        if rest and (m := re.match(_UID, rest[0])) is not None:
            uid = int(m.group("uid"))
            rest = rest[1:]
        if (
            len(rest) < 2
            or (job := re.match(_JOB, rest[0])) is None
            or (step := re.match(_STEP, rest[1])) is None
        ):
            return None
        if rest[2:3] == ["slurm"]:
            return None  # slurmstepd's own cgroup
        return SlurmStep(job.group("id"), step.group("step"), uid)
    return None


def parse_slurm_cgroup(text: str) -> SlurmStep | None:
    """The Slurm job step a ``/proc/<pid>/cgroup`` file names, or None."""
    return first_in_cgroup(text, parse_slurm_path)
