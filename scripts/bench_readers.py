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
first saw no new sample). The contexts are the source's own, taken from its devices and reset each round
as the source resets them: since the source keeps one per device across cycles, the earlier way (catching
contexts as they were built, in the captured cycle) caught none, and every reader measured 0.000 ms. A
reader that called the library in the captured cycle but measures zero time or makes no call when replayed
now ends the run with a message (:func:`check`) instead of printing a zero.

Usage: python scripts/bench_readers.py [--rounds 300] [--gpus 16] [--processes 256]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench_common import make_runner, write_scenario
from bench_peer import LastText

import falcon_gpu.sources.nvml.source as nvml_source
from falcon_gpu.sources.nvml.readers import READERS, Fields, Reader
from falcon_gpu.sources.nvml.readers.base import DeviceContext

_PLAIN = (int, str, float)
"""Arguments that are part of a call's key by value (handles and arrays by identity)."""


class Replay:
    """The library, answering each (function, arguments) with the answer recorded for it, and counting
    the calls made through it (:attr:`calls`)."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self._answers: dict[tuple[Any, ...], tuple[bool, Any]] = {}
        self.recording = True
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._lib, name)
        if not callable(fn):
            return fn
        answers = self._answers

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
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


class Bench:
    """A warmed-up source, its per-GPU reader contexts (kept by the source across cycles and reset each
    one: taken from its devices, since none is built after the first cycle), the library replaying it,
    each GPU's ``lastSeen`` sample time at the captured cycle's start and each reader's library calls in
    that cycle (:attr:`captured`, counted through the source's own reader list)."""

    def __init__(self, gpus: int, processes: int) -> None:
        runner = make_runner(write_scenario(gpus, processes), LastText())
        self.replay = Replay(runner.source._nvml.lib)  # type: ignore[attr-defined]
        runner.source._nvml.lib = self.replay  # type: ignore[attr-defined]
        for _ in range(5):
            runner.run()
        self.source = runner.source
        self.last_seen = dict(self.source._last_seen)  # type: ignore[attr-defined]
        self.captured = {name: 0 for name, _ in READERS}
        nvml_source.READERS = tuple((name, self._counted(name, reader)) for name, reader in READERS)  # type: ignore[misc]
        try:
            runner.run()  # the captured cycle: every answer recorded
        finally:
            nvml_source.READERS = READERS  # type: ignore[misc]
        self.replay.recording = False
        devices = self.source._devices  # type: ignore[attr-defined]
        self.contexts: list[DeviceContext] = [devices[i].ctx for i in sorted(devices)]
        if len(self.contexts) != gpus:
            kept = len(self.contexts)
            raise SystemExit(f"bench_readers: the source kept {kept} device contexts, not {gpus}")

    def _counted(self, name: str, reader: Reader) -> Reader:
        def counted(ctx: DeviceContext) -> Fields:
            before = self.replay.calls
            try:
                return reader(ctx)
            finally:
                self.captured[name] += self.replay.calls - before

        return counted

    def round(self, seconds: dict[str, float], calls: dict[str, int]) -> None:
        """Every reader over every GPU once, from the captured cycle's state; adds each reader's time and
        library calls."""
        for ctx in self.contexts:  # a new cycle's state, as the source makes it (NvmlSource._read_device)
            ctx.reset(ctx.timestamp, self.source._field_values.batch(ctx.scope, ctx.handle))  # type: ignore[attr-defined]
            ctx.last_seen_us[ctx.scope] = self.last_seen[ctx.scope]
        replay, clock = self.replay, time.perf_counter
        for name, reader in READERS:
            before, started = replay.calls, clock()
            for ctx in self.contexts:
                ctx.fields.update(reader(ctx))
            seconds[name] = clock() - started
            calls[name] = replay.calls - before


def check(captured: dict[str, int], best: dict[str, float], replayed: dict[str, int]) -> None:
    """SystemExit where a reader that called the library in the captured cycle measured zero time or made
    no call in a replayed round: the replay no longer reaches it, and a zero is no figure."""
    if not any(captured.values()):
        raise SystemExit("bench_readers: the captured cycle made no NVML call: the readers were not reached")
    lost = [
        f"{name} ({captured[name]} calls captured, {replayed[name]} replayed, {best[name] * 1000:.3f} ms)"
        for name in captured
        if captured[name] and (replayed[name] == 0 or best[name] <= 0.0)
    ]
    if lost:
        raise SystemExit("bench_readers: the replay does not reach " + ", ".join(lost))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--gpus", type=int, default=16)
    ap.add_argument("--processes", type=int, default=256)
    a = ap.parse_args()
    bench = Bench(a.gpus, a.processes)
    seconds: dict[str, float] = {}
    best = {name: float("inf") for name, _ in READERS}
    replayed = {name: 0 for name, _ in READERS}
    calls: dict[str, int] = {}
    for _ in range(a.rounds):
        bench.round(seconds, calls)
        for name, s in seconds.items():
            best[name] = min(best[name], s)
            replayed[name] = max(replayed[name], calls[name])
    check(bench.captured, best, replayed)
    title = f"reader ({a.gpus} GPUs x {a.processes} processes, fastest of {a.rounds})"
    print(f"| {title} | ms per cycle | NVML calls |")
    print("|---|---|---|")
    for name, s in best.items():
        print(f"| {name} | {s * 1000:.3f} | {replayed[name]} |")
    print(f"| all readers | {sum(best.values()) * 1000:.3f} | {sum(replayed.values())} |")


if __name__ == "__main__":
    main()
