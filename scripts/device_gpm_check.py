#!/usr/bin/env python3
"""Device check for issue 11, run by ``device-check.sh`` on a lent Hopper GPU while a matmul loop runs.

1. NVML's own GPM values, read with plain pynvml (two samples one second apart), per GPU: what
   falcon-gpu's ``falcon_gpu_sm_active_ratio`` / ``_tensor_active_ratio`` / ``_dram_active_ratio``
   must agree with (printed next to them by the shell script).
2. The real NVML cost of one cycle: CPU and wall time per call of every function a cycle makes
   (``NvmlSource`` over a counting, timing wrapper of pynvml), and of the whole ``collect``: the
   figure the simulator cannot give (docs/BENCHMARKS.md, "On a real GPU").
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import pynvml

from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sources.nvml.source import NvmlSource

METRICS = {"sm_active": 2, "sm_occupancy": 3, "tensor_active": 5, "dram_active": 10, "graphics_active": 1}


def gpm_direct() -> None:
    pynvml.nvmlInit()
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        if not pynvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice:
            print(f"gpu {i}: GPM not supported")
            continue
        a, b = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
        pynvml.nvmlGpmSampleGet(h, a)
        time.sleep(1.0)
        pynvml.nvmlGpmSampleGet(h, b)
        req = pynvml.c_nvmlGpmMetricsGet_t()
        req.version, req.numMetrics, req.sample1, req.sample2 = 1, len(METRICS), a, b
        for j, mid in enumerate(METRICS.values()):
            req.metrics[j].metricId = mid
        pynvml.nvmlGpmMetricsGet(req)
        got = {
            n: (round(req.metrics[j].value / 100, 4), req.metrics[j].nvmlReturn)
            for j, n in enumerate(METRICS)
        }
        print(f"gpu {i}: pynvml GPM over 1 s (ratio, nvmlReturn): {got}")
        pynvml.nvmlGpmSampleFree(a)
        pynvml.nvmlGpmSampleFree(b)
    pynvml.nvmlShutdown()


class Timed:
    """An NVML library (pynvml) with every ``nvml*`` call counted and timed (CPU and wall)."""

    def __init__(self, lib: Any = pynvml) -> None:
        self.lib = lib
        self.calls: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.lib, name)
        if not (name.startswith("nvml") and callable(fn)):
            return fn

        def timed(*args: Any, **kwargs: Any) -> Any:
            c0, w0 = time.process_time(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                entry = self.calls[name]
                entry[0] += 1
                entry[1] += time.process_time() - c0
                entry[2] += time.perf_counter() - w0

        return timed


def nvml_cost(cycles: int = 30, nvml: Any = pynvml) -> None:
    lib = Timed(nvml)
    source = NvmlSource(lib, Telemetry())
    for _ in range(3):
        source.collect(time.time())
    lib.calls.clear()
    cpu = wall = 0.0
    for _ in range(cycles):
        c0, w0 = time.process_time(), time.perf_counter()
        snap = source.collect(time.time())
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
        time.sleep(0.2)
    gpus = len(snap.devices)
    print(
        f"collect(): {1000 * cpu / cycles:.2f} ms CPU, {1000 * wall / cycles:.2f} ms wall per cycle,"
        f" {gpus} GPUs"
    )
    print("| function | calls/GPU/cycle | CPU us/call | wall us/call |")
    print("|---|---|---|---|")
    for name, (n, c, w) in sorted(lib.calls.items(), key=lambda kv: -kv[1][2]):
        print(f"| {name} | {n / cycles / max(gpus, 1):.2f} | {1e6 * c / n:.1f} | {1e6 * w / n:.1f} |")
    for d in snap.devices:
        print(f"gpu {d.index}: falcon-gpu gpm={d.gpm} pcie_tx/s={d.pcie_tx_bytes_per_second} "
              f"nvlink_tx={d.nvlink_tx_bytes} nvlink_errors={d.nvlink_errors}")  # fmt: skip
    source.close()


if __name__ == "__main__":
    gpm_direct()
    nvml_cost()
