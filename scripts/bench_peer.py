#!/usr/bin/env python3
"""falcon_gpu's cycle against the exporter a user writes in an afternoon, in one run.

The peer (:class:`PeerExporter`) is the straightforward pynvml + prometheus_client
exporter: one ``Gauge`` per reading labelled by GPU, every reading asked with its
own pynvml call in a ``try``/``except NVMLError``, the same process lists and SM
samples read, and ``generate_latest`` for the text. Both run on their own
``SimulatedNvml`` of the same synthetic node (``gen_scenario.py``), alternating
cycle by cycle in this process so that both see the same machine state; the
figure is the median CPU time (``time.process_time``) per cycle over the repeats.
falcon_gpu's cycle is the one ``bench_cycle.py`` measures: NVML source, health,
``falcon_gpu`` schema, Prometheus text into a string (no attribution: the peer has none).

The NVML calls per GPU per cycle, counted by the simulator, are reported for both.
Usage: python scripts/bench_peer.py [--cycles 300]
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
from collections.abc import Callable
from typing import Any

import pynvml
from bench_common import load_nvml, load_scenario, make_runner, write_scenario
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

LABELS = ("gpu", "uuid", "name")
GAUGES = {
    "gpu_memory_used_bytes": "Framebuffer memory used.",
    "gpu_memory_free_bytes": "Framebuffer memory free.",
    "gpu_memory_total_bytes": "Framebuffer memory total.",
    "gpu_utilization_ratio": "GPU busy ratio.",
    "gpu_memory_utilization_ratio": "Memory controller busy ratio.",
    "gpu_temperature_celsius": "GPU temperature.",
    "gpu_memory_temperature_celsius": "Memory temperature.",
    "gpu_power_watts": "Power draw.",
    "gpu_power_limit_watts": "Enforced power limit.",
    "gpu_performance_state": "P-state.",
    "gpu_sm_clock_hertz": "SM clock.",
    "gpu_memory_clock_hertz": "Memory clock.",
    "gpu_fan_speed_ratio": "Fan speed.",
    "gpu_encoder_utilization_ratio": "Encoder busy ratio.",
    "gpu_decoder_utilization_ratio": "Decoder busy ratio.",
    "gpu_clock_event_reasons": "Clock event reasons bitmask.",
    "gpu_retired_pages_pending": "Retired pages pending.",
    "gpu_remapped_rows_pending": "Remapped rows pending.",
    "gpu_remapped_rows_failed": "Row remapping failed.",
    "gpu_inforom_valid": "infoROM checksum valid.",
    "gpu_processes": "Processes on the GPU.",
    "gpu_up": "1 if the GPU answers.",
}
COUNTERS = {
    "gpu_energy_joules": "Energy since boot.",
    "gpu_pcie_replays": "PCIe replays.",
    "gpu_ecc_corrected_volatile": "ECC single-bit volatile.",
    "gpu_ecc_uncorrected_volatile": "ECC double-bit volatile.",
    "gpu_ecc_corrected_aggregate": "ECC single-bit aggregate.",
    "gpu_ecc_uncorrected_aggregate": "ECC double-bit aggregate.",
    "gpu_retired_pages_single_bit": "Retired pages, single-bit.",
    "gpu_retired_pages_double_bit": "Retired pages, double-bit.",
    "gpu_remapped_rows_correctable": "Remapped rows, correctable.",
    "gpu_remapped_rows_uncorrectable": "Remapped rows, uncorrectable.",
}
ECC = (
    ("corrected_volatile", pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC),
    ("uncorrected_volatile", pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC),
    ("corrected_aggregate", pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_AGGREGATE_ECC),
    ("uncorrected_aggregate", pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC),
)


def q(fn: Callable[..., Any], *args: Any) -> Any:
    """The answer, or None when NVML says no: what every hand-written exporter does."""
    try:
        return fn(*args)
    except pynvml.NVMLError:
        return None


class PeerExporter:
    def __init__(self, nvml: Any) -> None:
        self.nv = nvml
        nvml.nvmlInit()
        self.registry = CollectorRegistry()
        self.m: dict[str, Any] = {n: Gauge(n, h, LABELS, registry=self.registry) for n, h in GAUGES.items()}
        for n, h in COUNTERS.items():  # counters that mirror the device's own: set through a gauge
            self.m[n] = Gauge(n + "_total", h, LABELS, registry=self.registry)
        self.errors = Counter("exporter_errors", "Scrape errors.", registry=self.registry)
        self.last_seen: dict[int, int] = {}

    def _set(self, name: str, lb: tuple[str, str, str], value: float | None) -> None:
        if value is not None:
            self.m[name].labels(*lb).set(value)

    def scrape(self) -> bytes:
        nv = self.nv
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            lb = (str(i), nv.nvmlDeviceGetUUID(h), nv.nvmlDeviceGetName(h))
            try:
                self._device(h, i, lb)
            except pynvml.NVMLError:
                self.errors.inc()
                self._set("gpu_up", lb, 0)
            else:
                self._set("gpu_up", lb, 1)
        return generate_latest(self.registry)

    def _device(self, h: Any, i: int, lb: tuple[str, str, str]) -> None:
        nv, s = self.nv, self._set
        mem = q(nv.nvmlDeviceGetMemoryInfo, h)
        if mem is not None:
            s("gpu_memory_used_bytes", lb, mem.used)
            s("gpu_memory_free_bytes", lb, mem.free)
            s("gpu_memory_total_bytes", lb, mem.total)
        util = q(nv.nvmlDeviceGetUtilizationRates, h)
        if util is not None:
            s("gpu_utilization_ratio", lb, util.gpu / 100)
            s("gpu_memory_utilization_ratio", lb, util.memory / 100)
        s("gpu_temperature_celsius", lb, q(nv.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU))
        fields = q(nv.nvmlDeviceGetFieldValues, h, [pynvml.NVML_FI_DEV_MEMORY_TEMP])
        if fields is not None and fields[0].nvmlReturn == pynvml.NVML_SUCCESS:
            s("gpu_memory_temperature_celsius", lb, fields[0].value.uiVal)
        power = q(nv.nvmlDeviceGetPowerUsage, h)
        s("gpu_power_watts", lb, None if power is None else power / 1000)
        limit = q(nv.nvmlDeviceGetEnforcedPowerLimit, h)
        s("gpu_power_limit_watts", lb, None if limit is None else limit / 1000)
        energy = q(nv.nvmlDeviceGetTotalEnergyConsumption, h)
        s("gpu_energy_joules", lb, None if energy is None else energy / 1000)
        s("gpu_performance_state", lb, q(nv.nvmlDeviceGetPerformanceState, h))
        sm = q(nv.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM)
        s("gpu_sm_clock_hertz", lb, None if sm is None else sm * 1e6)
        mclk = q(nv.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_MEM)
        s("gpu_memory_clock_hertz", lb, None if mclk is None else mclk * 1e6)
        fan = q(nv.nvmlDeviceGetFanSpeed, h)
        s("gpu_fan_speed_ratio", lb, None if fan is None else fan / 100)
        enc = q(nv.nvmlDeviceGetEncoderUtilization, h)
        s("gpu_encoder_utilization_ratio", lb, None if enc is None else enc[0] / 100)
        dec = q(nv.nvmlDeviceGetDecoderUtilization, h)
        s("gpu_decoder_utilization_ratio", lb, None if dec is None else dec[0] / 100)
        s("gpu_clock_event_reasons", lb, q(nv.nvmlDeviceGetCurrentClocksEventReasons, h))
        s("gpu_pcie_replays", lb, q(nv.nvmlDeviceGetPcieReplayCounter, h))
        for name, error_type, counter_type in ECC:
            s("gpu_ecc_" + name, lb, q(nv.nvmlDeviceGetTotalEccErrors, h, error_type, counter_type))
        single = q(
            nv.nvmlDeviceGetRetiredPages, h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
        )
        double = q(nv.nvmlDeviceGetRetiredPages, h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        s("gpu_retired_pages_single_bit", lb, None if single is None else len(single))
        s("gpu_retired_pages_double_bit", lb, None if double is None else len(double))
        s("gpu_retired_pages_pending", lb, q(nv.nvmlDeviceGetRetiredPagesPendingStatus, h))
        rows = q(nv.nvmlDeviceGetRemappedRows, h)
        if rows is not None:
            for name, value in zip(("correctable", "uncorrectable", "pending", "failed"), rows, strict=True):
                s("gpu_remapped_rows_" + name, lb, value)
        valid = True
        try:
            nv.nvmlDeviceValidateInforom(h)
        except pynvml.NVMLError:
            valid = False
        s("gpu_inforom_valid", lb, valid)
        q(nv.nvmlDeviceGetMigMode, h)
        pids: set[int] = set()
        for fn in (
            nv.nvmlDeviceGetComputeRunningProcesses,
            nv.nvmlDeviceGetGraphicsRunningProcesses,
            nv.nvmlDeviceGetMPSComputeRunningProcesses,
        ):
            pids.update(p.pid for p in q(fn, h) or ())
        samples = q(nv.nvmlDeviceGetProcessUtilization, h, self.last_seen.get(i, 0)) or ()
        self.last_seen[i] = max((x.timeStamp for x in samples), default=self.last_seen.get(i, 0))
        s("gpu_processes", lb, len(pids))


def calls_per_gpu(calls: dict[str, int], before: dict[str, int], cycles: int, gpus: int) -> float:
    return sum(n - before.get(fn, 0) for fn, n in calls.items()) / cycles / gpus


def measure(gpus: int, procs: int, cycles: int) -> dict[str, float]:
    path = write_scenario(gpus, procs)
    sink = io.StringIO()
    runner = make_runner(path, sink)
    ours_lib = runner.source._nvml.lib  # type: ignore[attr-defined]
    peer_lib = load_nvml(load_scenario(path))
    peer = PeerExporter(peer_lib)
    for _ in range(3):  # warm-up: identity, variants and NOT_SUPPORTED learnt, caches filled
        runner.run()
        peer.scrape()
    ours_before, peer_before = dict(ours_lib.calls), dict(peer_lib.calls)
    ours, theirs = [], []
    size = (0, 0)
    for _ in range(cycles):
        sink.seek(0)
        sink.truncate()
        t0 = time.process_time()
        runner.run()
        t1 = time.process_time()
        text = peer.scrape()
        t2 = time.process_time()
        ours.append(t1 - t0)
        theirs.append(t2 - t1)
        size = (len(sink.getvalue()), len(text))
    return {
        "ours_ms": statistics.median(ours) * 1000,
        "peer_ms": statistics.median(theirs) * 1000,
        "ours_calls": calls_per_gpu(ours_lib.calls, ours_before, cycles, gpus),
        "peer_calls": calls_per_gpu(peer_lib.calls, peer_before, cycles, gpus),
        "ours_bytes": size[0],
        "peer_bytes": size[1],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=300)
    a = ap.parse_args()
    print(
        "| node | falcon_gpu CPU ms/cycle | peer CPU ms/cycle | ratio (target <= 0.35) "
        "| NVML calls/GPU/cycle falcon_gpu / peer | text bytes falcon_gpu / peer |"
    )
    print("|---|---|---|---|---|---|")
    for gpus, procs in ((8, 64), (16, 256)):
        r = measure(gpus, procs, a.cycles)
        print(
            f"| {gpus} GPUs x {procs} processes | {r['ours_ms']:.2f} | {r['peer_ms']:.2f} "
            f"| {r['ours_ms'] / r['peer_ms']:.2f}x | {r['ours_calls']:.1f} / {r['peer_calls']:.1f} "
            f"| {r['ours_bytes']} / {r['peer_bytes']} |"
        )


if __name__ == "__main__":
    main()
