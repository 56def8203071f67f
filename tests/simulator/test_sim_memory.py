"""The simulator's process-utilisation window costs no memory per cycle (issue 19, item 11).

It answers ``nvmlDeviceGetProcessUtilization`` with the samples newer than the caller's last
timestamp, so it remembers its last STAMPS_KEPT cycles; holding each cycle's structs made an
agent run on 5,000 processes grow 1.6 MiB a cycle for 64 cycles, memory a real node's driver
holds, not the agent, which the agent's memory figures then had to subtract.
"""

from __future__ import annotations

import gc
import tracemalloc

from tests.simulator.test_sim_library import gpu, sim_of

PROCESSES = 2000


def test_the_sample_window_does_not_grow_with_the_cycles() -> None:
    one = {"name": "python", "type": "compute", "used_memory_bytes": 1 << 30, "sm_util_percent": 5}
    processes = [{"pid": 10_000 + i, **one} for i in range(PROCESSES)]
    sim = sim_of(gpu(processes=processes), clock=1000.0)
    handle = sim.nvmlDeviceGetHandleByIndex(0)

    def cycle(last: int) -> int:
        sim.nvmlDeviceGetCount()  # the next cycle begins
        samples = sim.nvmlDeviceGetProcessUtilization(handle, last)
        assert len(samples) == PROCESSES
        return max(s.timeStamp for s in samples)

    last = 0
    for _ in range(5):
        last = cycle(last)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(40):
            last = cycle(last)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 256 * 1024, f"{grown / 2**20:.1f} MiB over 40 cycles"  # was 40 x 2,000 structs: ~25 MiB
