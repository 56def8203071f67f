"""``doctor`` rows for attribution: can this agent see what it needs to name GPU users?

Each row is a :data:`~falcon_gpu.checks.Row`. Host PID visibility is checked
here; every source adds its own rows (:meth:`AttributionSource.diagnose`, a
blocking read that touches no agent state), and the views those reads returned
are joined with a throwaway :class:`Joiner`, so the agent's counters stay as they
are. Sources not expected here (``kubernetes = off``, or ``auto`` on a host with
neither socket nor log dirs) give SKIP rows; expected and broken ones FAIL.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from falcon_gpu.attribution.chain import Chain
from falcon_gpu.attribution.joiner import Joiner
from falcon_gpu.attribution.pid_cache import PidCache
from falcon_gpu.attribution.settings import AttributionSettings
from falcon_gpu.attribution.source import AttributionSource, SourceView
from falcon_gpu.checks import FAIL, OK, SKIP, Row, verdict
from falcon_gpu.model.snapshot import Snapshot


def diagnose_rows(
    settings: AttributionSettings,
    snapshot: Snapshot,
    pids: PidCache,
    sources: Sequence[AttributionSource],
) -> list[Row]:
    from falcon_gpu.attribution.attributor import snapshot_pids

    all_pids = sorted(set(snapshot_pids(snapshot)))
    rows = [_pid_row(settings, pids, all_pids)]
    views: list[SourceView] = []
    for source in sources:
        source_rows, view = source.diagnose()
        rows += source_rows
        views.append(view)
    if not all_pids:
        rows.append(("GPU processes attributed", SKIP, "no GPU processes right now; nothing to attribute"))
        return rows
    identities = {pid: pids.lookup(pid) for pid in all_pids}
    result = Joiner().join(snapshot, identities, Chain(views), time.monotonic())
    outside = len(all_pids) - result.in_pod
    ok = result.attributed == result.in_pod
    detail = (
        f"{result.attributed} of {result.in_pod} GPU processes in pods attributed to a container; "
        f"{outside} in no pod"
    )
    if not ok:
        detail += " (the unnamed ones have no entry in the log dirs yet)"
    rows.append(("GPU processes attributed", verdict(ok), detail))
    return rows


def _pid_row(settings: AttributionSettings, pids: PidCache, all_pids: list[int]) -> Row:
    if not all_pids:
        return ("host PIDs visible", SKIP, "no GPU processes right now; nothing to check")
    visible = [pid for pid in all_pids if pids.visible(pid)]
    if len(visible) == len(all_pids):
        return ("host PIDs visible", OK, f"all {len(all_pids)} NVML PIDs exist under {settings.proc_root}")
    return (
        "host PIDs visible",
        FAIL,
        f"{len(visible)} of {len(all_pids)} NVML PIDs exist under {settings.proc_root}: "
        "run the agent with hostPID: true (or mount the host's /proc and set proc_root)",
    )
