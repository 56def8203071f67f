#!/usr/bin/env python3
"""The NVML readers' own CPU per cycle, with the simulator's cost taken out by replaying its answers.

``bench_peer.py --breakdown`` subtracts the timed simulator calls from the readers' wall time; on a
shared machine that difference is noisy. Here one cycle of the synthetic node (``gen_scenario.py``) is
run with every NVML answer recorded, then each reader is run over every GPU's captured context again
and again with the recorded answers handed back (a dictionary look-up per call, which is all that is
left of the library), and the fastest round per reader is kept. What remains is the readers' own
work plus the NVML call framework (``calls.py``) they go through. The replaying library is in place
from the first cycle (so whatever the source keeps per device, bound functions included, goes through
it), hands each function out once (a plain attribute after the first look-up, as a binding's module
functions are), and every round starts from the captured cycle's ``lastSeen`` per GPU, so the process
samples are consumed as in a real cycle (until this script's second version every round after the
first saw no new sample).

Usage: python scripts/bench_readers.py [--rounds 300] [--gpus 16] [--processes 256]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench_common import make_runner, write_scenario
from bench_peer import LastText

import falcon_gpu.sources.nvml.source as nvml_source
from falcon_gpu.sources.nvml.readers import READERS
from falcon_gpu.sources.nvml.readers.base import DeviceContext

_PLAIN = (int, str, float)
"""Arguments that are part of a call's key by value (handles and arrays by identity)."""


class Replay:
    """The library, answering each (function, arguments) with the answer recorded for it."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self._answers: dict[tuple[Any, ...], tuple[bool, Any]] = {}
        self.recording = True

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._lib, name)
        if not callable(fn):
            return fn
        answers = self._answers

        def call(*args: Any, **kwargs: Any) -> Any:
            key = (name, *[a if a.__class__ in _PLAIN else id(a) for a in args])
            if self.recording or key not in answers:
                try:
                    self._answers[key] = (True, fn(*args, **kwargs))
                except Exception as e:  # an NVMLError is an answer too
                    self._answers[key] = (False, e)
            ok, answer = answers[key]
            if not ok:
                raise answer
            return answer

        setattr(self, name, call)  # found without __getattr__ from now on
        return call


def captured(gpus: int, processes: int) -> tuple[Any, list[DeviceContext], Replay, dict[str, int]]:
    """A warmed-up source, one context per GPU of its last cycle, the library replaying it, and each
    GPU's ``lastSeen`` sample time at that cycle's start."""
    runner = make_runner(write_scenario(gpus, processes), LastText())
    replay = Replay(runner.source._nvml.lib)  # type: ignore[attr-defined]
    runner.source._nvml.lib = replay  # type: ignore[attr-defined]
    for _ in range(5):
        runner.run()
    contexts: list[DeviceContext] = []

    class Capturing(DeviceContext):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            contexts.append(self)

    last_seen = dict(runner.source._last_seen)  # type: ignore[attr-defined]
    nvml_source.DeviceContext = Capturing  # type: ignore[misc]
    try:
        runner.run()
    finally:
        nvml_source.DeviceContext = DeviceContext  # type: ignore[misc]
    replay.recording = False
    return runner.source, contexts, replay, last_seen


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--gpus", type=int, default=16)
    ap.add_argument("--processes", type=int, default=256)
    a = ap.parse_args()
    source, contexts, _, last_seen = captured(a.gpus, a.processes)
    best = {name: float("inf") for name, _ in READERS}
    for _ in range(a.rounds):
        for ctx in contexts:  # a new cycle's state, as the source makes it
            ctx.fields, ctx.samples = {}, None
            ctx.last_seen_us[ctx.scope] = last_seen[ctx.scope]
            ctx.field_values = source._field_values.batch(ctx.scope, ctx.handle)
        for name, reader in READERS:
            started = time.perf_counter()
            for ctx in contexts:
                ctx.fields.update(reader(ctx))
            best[name] = min(best[name], time.perf_counter() - started)
    print(f"| reader ({a.gpus} GPUs x {a.processes} processes, fastest of {a.rounds}) | ms per cycle |")
    print("|---|---|")
    for name, seconds in best.items():
        print(f"| {name} | {seconds * 1000:.3f} |")
    print(f"| all readers | {sum(best.values()) * 1000:.3f} |")


if __name__ == "__main__":
    main()
