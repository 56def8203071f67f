"""``falcon-gpu doctor``: check everything the agent depends on and say what to fix.

Prints one row per check (NVML and driver, each GPU with its health, host PID
visibility, the kubelet socket, log dirs, the spool dir, each sink's write path)
as ``OK``, ``WARN``, ``FAIL`` or ``SKIP`` (:mod:`falcon_gpu.checks`) and exits 0
unless something FAILs. Never prints a secret: sinks report through their own
``check``, which sends a request that changes nothing on the sink's write path, and every
row goes through the runtime's log redactor (a server may echo a header or query value).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

from falcon_gpu.agent.runtime import build
from falcon_gpu.checks import FAIL, OK, SKIP, WARN, Row, Status, verdict
from falcon_gpu.health import HealthEvaluator
from falcon_gpu.model.cycle import FAIL as HEALTH_FAIL
from falcon_gpu.model.cycle import WARN as HEALTH_WARN
from falcon_gpu.model.snapshot import DeviceReading, Snapshot
from falcon_gpu.risk import RiskHistory, RiskReport
from falcon_gpu.risk.table import DRAIN_AT
from falcon_gpu.settings import Settings

HEALTH_FIX = {
    "lost": "the GPU fell off the bus: check dmesg for XID 79, reset or reseat it",
    "ecc": "uncorrectable ECC errors: drain the node, reset the GPU; RMA if it repeats",
    "retired_pages": "pages retired or pending: reset the GPU to retire them; RMA at 60 or more",
    "remapped_rows": "row remapping pending or failed: reset the GPU; a failed remap means RMA",
    "xid": "a recent XID: check dmesg and NVIDIA's XID catalogue",
    "pcie": "PCIe replays rising: check the slot, riser and cabling",
    "thermal": "thermal slowdown: check cooling and airflow",
    "power": "power brake or slowdown: check the power supply and cabling",
    "inforom": "the InfoROM is corrupt: update the VBIOS or RMA",
}


def _fix(check: str) -> str:
    return f" ({HEALTH_FIX[check]})" if check in HEALTH_FIX else ""


def _gpu_row(d: DeviceReading, checks: dict[str, int], risk: RiskReport) -> Row:
    """The GPU's health, and its risk score with the reasons when it has any (docs/HEALTH.md)."""
    failing = sorted(c for c, level in checks.items() if level == HEALTH_FAIL)
    warning = sorted(c for c, level in checks.items() if level == HEALTH_WARN)
    status: Status = FAIL if failing else WARN if warning or risk.score >= DRAIN_AT else OK
    detail = f"{d.name} {d.uuid}"
    if not d.up:
        return (f"GPU {d.index}", FAIL, f"{detail}: {d.error}; fix: {HEALTH_FIX['lost']}")
    parts = [f"failing {c}{_fix(c)}" for c in failing] + [f"warning {c}{_fix(c)}" for c in warning]
    if risk.reasons:
        parts.append(risk.text() + (" (a drain candidate)" if risk.score >= DRAIN_AT else ""))
    return (f"GPU {d.index}", status, detail + (": " + "; ".join(parts) if parts else ": healthy"))


def _nvml_rows(snapshot: Snapshot) -> list[Row]:
    if not snapshot.nvml_ok:  # the source's message already says how to fix it
        return [("NVML", FAIL, snapshot.nvml_error or "NVML cannot start")]
    rows: list[Row] = [
        (
            "NVML",
            OK,
            f"driver {snapshot.driver_version}, CUDA {snapshot.cuda_version}, {len(snapshot.devices)} GPU(s)",
        )
    ]
    health = HealthEvaluator().evaluate(snapshot)
    risk = RiskHistory()
    risk.add(snapshot)  # one look: the levels count now, the trends need the store's history
    rows += [_gpu_row(d, health[d.uuid].checks, risk.report(d.uuid)) for d in snapshot.devices]
    return rows


def _spool_row(settings: Settings) -> Row:
    if all(s.type == "stdout" for s in settings.sinks):
        return ("spool dir", SKIP, "not needed (stdout only)")
    path = settings.spool_dir
    probe = path if path.exists() else path.parent
    ok = probe.exists() and os.access(probe, os.W_OK)
    detail = f"{path}" + ("" if ok else "; fix: create it or mount a writable volume there")
    return ("spool dir", verdict(ok), detail)


def collect_rows(settings: Settings, simulate: str | None) -> list[Row]:
    rt = build(settings, simulate=simulate, one_shot=True)
    try:
        rt.attributor.refresh_now()
        snapshot = rt.source.collect(time.time())
        rows = _nvml_rows(snapshot)
        rows += rt.attributor.diagnose(snapshot)
        rows.append(_spool_row(settings))  # spool_dir is never one of the simulated host's paths
        for sink in rt.sinks:
            try:
                ok, detail = sink.check()
            except Exception as exc:
                ok, detail = False, f"check failed: {type(exc).__name__}"
            rows.append((f"sink {sink.name}", verdict(ok), detail))
        return [(check, status, rt.scrub(detail)) for check, status, detail in rows]
    finally:
        rt.close(2.0)


def print_table(rows: list[Row], out: TextIO) -> None:
    width = max((len(r[0]) for r in rows), default=5)
    for check, status, detail in rows:
        out.write(f"{status:<4}  {check:<{width}}  {detail}\n")


def doctor(settings: Settings, *, simulate: str | None) -> int:
    rows = collect_rows(settings, simulate)
    print_table(rows, sys.stdout)
    counts = {s: sum(1 for r in rows if r[1] == s) for s in (OK, WARN, FAIL, SKIP)}
    summary = ", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n)
    verdict_line = "all checks passed" if not counts[FAIL] else "some checks failed"
    sys.stdout.write(f"\n{verdict_line} ({summary})\n")
    return 0 if not counts[FAIL] else 1
