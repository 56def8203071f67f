"""``falcon-gpu top``: the agent's own runtime and cycle, drawn instead of delivered.

It builds the runtime as ``run`` does (same NVML source, attribution and health; no sinks,
no ``listen``), with per-process attribution on so that processes show under their pods.
``--once`` refreshes the lookups synchronously, runs one cycle and prints one frame as wide
as the terminal (``COLUMNS``, else 80 columns where stdout is no terminal) and, on a terminal,
no taller than it (pods that do not fit summarised); piped, it prints every line. The live view
needs a terminal: without one it exits 2 and says to use ``--once``. Otherwise the loop of ``run``
(:func:`~falcon_gpu.agent.loop.run_every`) runs a cycle every interval and
:mod:`~falcon_gpu.top.screen` draws it until ``q`` or Ctrl-C.
"""

from __future__ import annotations

import curses
import shutil
import sys
import threading
from typing import TextIO

from falcon_gpu.agent.commands import _prepare_one_shot, _runner, nvml_report
from falcon_gpu.agent.loop import STUCK_AFTER_S, run_every
from falcon_gpu.agent.runtime import build as build_runtime
from falcon_gpu.agent.signals import install_signals
from falcon_gpu.settings import Settings
from falcon_gpu.top.frame import build
from falcon_gpu.top.screen import Latest, show
from falcon_gpu.top.view import fit, text

ONCE_KEYS = "  (the live view scrolls)"


def _printable(frame: str, stream: TextIO) -> str:
    """The frame in the stream's encoding: an ASCII-only stream gets "?" for "…"."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return frame.encode(encoding, "replace").decode(encoding)


def top(settings: Settings, *, simulate: str | None, once: bool, out: TextIO | None = None) -> int:
    stream = out or sys.stdout
    settings = settings.model_copy(update={"process_metrics": True})
    rt = build_runtime(settings, simulate=simulate, with_sinks=False, one_shot=once)
    try:
        runner = _runner(rt, step=max(1, round(settings.interval)))
        _prepare_one_shot(rt)  # the first frame already names the pods
        if once:
            rendered = runner.run()
            size = shutil.get_terminal_size()
            # on a terminal one line less: the newline after the last would scroll the title away
            height = size.lines - 1 if stream.isatty() else None
            view = fit(build(rendered.cycle, size.columns), height, keys=ONCE_KEYS)
            stream.write(_printable(text(view), stream))
            stream.flush()
            lines = nvml_report(rendered)
            for line in lines:
                print(line, file=sys.stderr)
            return 1 if lines else 0
        if not stream.isatty():
            print("falcon-gpu: top draws on a terminal; `top --once` prints one frame", file=sys.stderr)
            return 2
        latest, stop = Latest(), threading.Event()
        install_signals(stop)
        rt.attributor.start()
        rt.xid.start()
        cycles = threading.Thread(
            target=run_every,
            args=(settings.interval, lambda: latest.put(runner.run().cycle), rt.telemetry, stop),
            name="top-cycles",
            daemon=True,
        )
        cycles.start()
        try:
            curses.wrapper(show, latest, stop, settings.interval)
        except curses.error as exc:  # no terminfo entry for TERM, or a terminal curses cannot drive
            print(f"falcon-gpu: top cannot draw here ({exc}); `top --once` prints one frame", file=sys.stderr)
            return 2
        finally:
            stop.set()
            cycles.join(STUCK_AFTER_S + 1)
        return 0
    finally:
        rt.close(1.0)
