"""``falcon-gpu top``: the agent's own runtime and cycle, drawn instead of delivered.

It builds the runtime as ``run`` does (same NVML source, attribution and health; no sinks,
no ``listen``), with per-process attribution on so that processes show under their pods.
``--once`` refreshes the lookups synchronously, runs one cycle and prints one frame; otherwise
the loop of ``run`` (:func:`~falcon_gpu.agent.loop.run_every`) redraws every interval until
Ctrl-C. Redrawing moves the cursor home and clears below: no terminal library to load.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from falcon_gpu.agent.commands import _prepare_one_shot, _runner, nvml_report
from falcon_gpu.agent.loop import run_every
from falcon_gpu.agent.runtime import build
from falcon_gpu.agent.signals import install_signals
from falcon_gpu.settings import Settings
from falcon_gpu.top.frame import render

CLEAR = "\x1b[H\x1b[2J"


def top(settings: Settings, *, simulate: str | None, once: bool, out: TextIO | None = None) -> int:
    stream = out or sys.stdout
    settings = settings.model_copy(update={"process_metrics": True})
    rt = build(settings, simulate=simulate, with_sinks=False, one_shot=once)
    try:
        runner = _runner(rt, step=max(1, round(settings.interval)))
        _prepare_one_shot(rt)  # the first frame already names the pods
        if once:
            rendered = runner.run()
            stream.write(render(rendered.cycle))
            stream.flush()
            lines = nvml_report(rendered)
            for line in lines:
                print(line, file=sys.stderr)
            return 1 if lines else 0

        def draw() -> None:
            frame = render(runner.run().cycle, interval=settings.interval)
            stream.write(CLEAR + frame)
            stream.flush()

        stop = threading.Event()
        install_signals(stop)
        rt.attributor.start()
        rt.xid.start()
        run_every(settings.interval, draw, rt.telemetry, stop)
        return 0
    finally:
        rt.close(1.0)
