"""``falcon-gpu doctor``: check everything the agent depends on and say what to fix.

Prints one row per check (NVML and driver, each GPU, host PID visibility, the
kubelet socket, log dirs, the spool dir, each sink) and exits 0 when all pass,
1 otherwise. Never prints a secret: sinks report through their own ``check``.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

from falcon_gpu.agent.runtime import build
from falcon_gpu.model.snapshot import Snapshot
from falcon_gpu.settings import Settings

Row = tuple[str, bool, str]


def _nvml_rows(snapshot: Snapshot) -> list[Row]:
    if not snapshot.nvml_ok:  # the source's message already says how to fix it
        return [("NVML", False, snapshot.nvml_error or "NVML cannot start")]
    rows: list[Row] = [
        (
            "NVML",
            True,
            f"driver {snapshot.driver_version}, CUDA {snapshot.cuda_version}, {len(snapshot.devices)} GPU(s)",
        )
    ]
    for d in snapshot.devices:
        detail = f"{d.name} {d.uuid}" + (
            "" if d.up else f": {d.error}; fix: check dmesg for XIDs, reset the GPU"
        )
        rows.append((f"GPU {d.index}", d.up, detail))
    return rows


def _spool_row(settings: Settings) -> Row:
    if all(s.type == "stdout" for s in settings.sinks):
        return ("spool dir", True, "not needed (stdout only)")
    path = settings.spool_dir
    probe = path if path.exists() else path.parent
    ok = probe.exists() and os.access(probe, os.W_OK)
    return ("spool dir", ok, f"{path}" + ("" if ok else "; fix: create it or mount a writable volume there"))


def collect_rows(settings: Settings, simulate: str | None) -> list[Row]:
    rt = build(settings, simulate=simulate)
    try:
        rt.attributor.refresh_now()
        snapshot = rt.source.collect(time.time())
        rows = _nvml_rows(snapshot)
        rows += rt.attributor.diagnose(snapshot)
        rows.append(_spool_row(rt.settings))
        for sink in rt.sinks:
            try:
                ok, detail = sink.check()
            except Exception as exc:
                ok, detail = False, f"check failed: {type(exc).__name__}"
            rows.append((f"sink {sink.name}", ok, detail))
        return rows
    finally:
        rt.close(2.0)


def print_table(rows: list[Row], out: TextIO) -> None:
    width = max((len(r[0]) for r in rows), default=5)
    for check, ok, detail in rows:
        out.write(f"{'OK  ' if ok else 'FAIL'}  {check:<{width}}  {detail}\n")


def doctor(settings: Settings, *, simulate: str | None) -> int:
    rows = collect_rows(settings, simulate)
    print_table(rows, sys.stdout)
    failed = [r for r in rows if not r[1]]
    sys.stdout.write(
        f"\n{len(rows) - len(failed)} passed, {len(failed)} failed\n"
        if failed
        else f"\nall {len(rows)} checks passed\n"
    )
    return 0 if not failed else 1
