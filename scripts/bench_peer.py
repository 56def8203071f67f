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
After the warm-up the heap is frozen (``settle_heap``), as ``falcon-gpu run`` does before its
first cycle; the process is shared, so the peer's start-up objects are frozen with ours.

The NVML calls per GPU per cycle, counted by the simulator, are reported for both.
``--breakdown`` adds a second, separate pass that says where each side's time goes:
every simulated NVML call timed (``perf_counter`` around it, on both sides), and
falcon_gpu's stages timed by wrapping them (readers, the source around them, health,
schema, encoder). Each part is derived per cycle and its median over the cycles is shown (so the parts need
not add up exactly); the wrappers cost time of their own, so the totals are above the first
table's: read the shares.
``--instructions`` adds each side's user-space instructions per cycle, counted by valgrind in a run of its
own (``--child``: the same node, warm-up and frozen heap, then N cycles of one side alone; a run of 0
cycles subtracted), with ``PYTHONHASHSEED=0``: a count that does not move with the machine's load (CPU
time on a shared machine can double), to compare before and after. It is not the CPU time: the peer runs
about twice the instructions per clock falcon_gpu's shorter, more varied cycle does (docs/BENCHMARKS.md).
``--nvml-lib PATH`` runs both sides on the real bindings instead (nvidia-ml-py's ctypes code over
``PATH``, a driver's ``libnvidia-ml.so`` or NVIDIA's NVML mock, whose 8 x H100 profile gets
``--processes`` processes per GPU), each as its own process: falcon_gpu as ``falcon-gpu run`` (stdout
sink into a pipe), the peer and the peer's ``--full`` variant (which also reads what falcon_gpu reads:
its field-values list and GPM) scraping on their own clock. CPU per cycle = (CPU of all threads at a
0.5 s interval - the same at a 60 s interval, ``--window`` s each) / cycles, median of ``--repeats``;
the 60 s run's CPU per second (the idle threads: falcon_gpu's XID event wait polls inside the mock,
where a real driver blocks in the kernel) is reported on its own. ``--threads`` instead runs
``falcon-gpu run`` inside a child of this script (``--agent-threads``: CPython names no OS thread, so
only in-process are the threads' names known) and prints each thread's CPU at 0.5 s and at 60 s, the
library's own (the mock's Go runtime) apart.
Usage: python scripts/bench_peer.py [--cycles 300] [--breakdown] [--instructions]
       python scripts/bench_peer.py --nvml-lib PATH [--processes 3] [--window 15] [--repeats 3] [--threads]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO, cast

import pynvml
from bench_common import instructions, load_nvml, load_scenario, make_runner, write_scenario
from bench_idle import Counted, agent_command
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

import falcon_gpu.schemas.falcon_gpu as fg_schema
import falcon_gpu.sources.nvml.source as nvml_source
from falcon_gpu.agent.loop import settle_heap
from falcon_gpu.model.snapshot import GPM_METRICS
from falcon_gpu.sinks.encoding import prom_text
from falcon_gpu.sources.nvml.field_values import FIELDS, VALUE_ATTR
from falcon_gpu.sources.nvml.gpm import METRICS as GPM_IDS
from falcon_gpu.sources.nvml.readers import READERS

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
    """``full``: also what falcon_gpu reads beyond that (its field-values list in one pynvml call, GPM
    between two samples allocated once), each value as a gauge: the same reads, the naive way."""

    def __init__(self, nvml: Any, full: bool = False) -> None:
        self.nv = nvml
        nvml.nvmlInit()
        self.registry = CollectorRegistry()
        self.m: dict[str, Any] = {n: Gauge(n, h, LABELS, registry=self.registry) for n, h in GAUGES.items()}
        for n, h in COUNTERS.items():  # counters that mirror the device's own: set through a gauge
            self.m[n] = Gauge(n + "_total", h, LABELS, registry=self.registry)
        self.errors = Counter("exporter_errors", "Scrape errors.", registry=self.registry)
        self.last_seen: dict[int, int] = {}
        self.full = full
        if full:
            self.fields = [(spec.name, spec.request) for spec in FIELDS]
            self.field_gauge = Gauge(
                "gpu_field", "A field value.", (*LABELS, "field"), registry=self.registry
            )
            self.gpm_gauge = Gauge(
                "gpu_gpm_ratio", "A GPM metric.", (*LABELS, "metric"), registry=self.registry
            )
            self.gpm_samples: dict[int, list[Any]] = {}

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
        if self.full:
            self._full(h, i, lb)

    def _full(self, h: Any, i: int, lb: tuple[str, str, str]) -> None:
        nv = self.nv
        values = q(nv.nvmlDeviceGetFieldValues, h, [request for _, request in self.fields])
        for (name, _), value in zip(self.fields, values or (), strict=False):
            if value.nvmlReturn == pynvml.NVML_SUCCESS:
                attr = VALUE_ATTR.get(value.valueType)
                if attr is not None:
                    self.field_gauge.labels(*lb, name).set(getattr(value.value, attr))
        samples = self.gpm_samples.get(i)
        if samples is None:
            support = q(nv.nvmlGpmQueryDeviceSupport, h)
            if support is None or not support.isSupportedDevice:
                return
            samples = self.gpm_samples[i] = [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc(), False]
        older, newer, primed = samples
        if q(nv.nvmlGpmSampleGet, h, newer) is None and not primed:
            return
        samples[:] = [newer, older, True]
        if not primed:
            return
        request = pynvml.c_nvmlGpmMetricsGet_t()
        request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(GPM_IDS)
        request.sample1, request.sample2 = older, newer
        for k, metric in enumerate(GPM_IDS):
            request.metrics[k].metricId = metric
        if q(nv.nvmlGpmMetricsGet, request) is not None:
            for k, name in enumerate(GPM_METRICS):
                self.gpm_gauge.labels(*lb, name).set(request.metrics[k].value / 100)


class LastText(io.TextIOBase):
    """The stdout sink's stream here: keeps the cycle's text, as the peer's ``generate_latest``
    returns its own; neither side's shipping (a pipe, a socket) is part of the comparison.
    (An ``io.StringIO`` would charge falcon_gpu about 0.3 ms a cycle at 16 x 256 for copying
    the text into its buffer, a cost no real sink has.)"""

    text = ""

    def write(self, text: str) -> int:
        self.text = text
        return len(text)


def calls_per_gpu(calls: dict[str, int], before: dict[str, int], cycles: int, gpus: int) -> float:
    return sum(n - before.get(fn, 0) for fn, n in calls.items()) / cycles / gpus


def measure(gpus: int, procs: int, cycles: int) -> dict[str, float]:
    path = write_scenario(gpus, procs)
    sink = LastText()
    runner = make_runner(path, cast(TextIO, sink))
    ours_lib = runner.source._nvml.lib  # type: ignore[attr-defined]
    peer_lib = load_nvml(load_scenario(path))
    peer = PeerExporter(peer_lib)
    for _ in range(3):  # warm-up: identity, variants and NOT_SUPPORTED learnt, caches filled
        runner.run()
        peer.scrape()
    settle_heap()  # as `falcon-gpu run` does before its first cycle (agent/loop.py); the peer's heap too
    ours_before, peer_before = dict(ours_lib.calls), dict(peer_lib.calls)
    ours, theirs = [], []
    size = (0, 0)
    for _ in range(cycles):
        t0 = time.process_time()
        runner.run()
        t1 = time.process_time()
        text = peer.scrape()
        t2 = time.process_time()
        ours.append(t1 - t0)
        theirs.append(t2 - t1)
        size = (len(sink.text), len(text))
    return {
        "ours_ms": statistics.median(ours) * 1000,
        "peer_ms": statistics.median(theirs) * 1000,
        "ours_calls": calls_per_gpu(ours_lib.calls, ours_before, cycles, gpus),
        "peer_calls": calls_per_gpu(peer_lib.calls, peer_before, cycles, gpus),
        "ours_bytes": size[0],
        "peer_bytes": size[1],
    }


class Stopwatch:
    """Seconds spent per stage, summed over a pass; ``stage`` names what runs now, so that
    the simulator's time inside a reader is charged to the reader's NVML share."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.stage = "peer"

    def wrap(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            outer, self.stage = self.stage, name
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started
                self.stage = outer

        return timed


class TimedLibrary:
    """A simulated library whose ``nvml*`` calls are timed into ``watch`` under ``sim:<stage>``."""

    def __init__(self, lib: Any, watch: Stopwatch) -> None:
        self._lib, self._watch = lib, watch

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._lib, name)
        if not name.startswith("nvml") or not callable(fn):
            return fn
        watch = self._watch

        def call(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                watch.seconds["sim:" + watch.stage] += time.perf_counter() - started

        return call


@contextmanager
def patched(obj: Any, attr: str, value: Any) -> Iterator[None]:
    old = getattr(obj, attr)
    setattr(obj, attr, value)
    try:
        yield
    finally:
        setattr(obj, attr, old)


def breakdown(gpus: int, procs: int, cycles: int) -> dict[str, float]:
    """ms per cycle of each part of both sides (see the module docstring)."""
    watch = Stopwatch()
    readers = tuple((name, watch.wrap(fn, "readers")) for name, fn in READERS)
    with (
        patched(nvml_source, "READERS", readers),
        patched(fg_schema, "render", watch.wrap(fg_schema.render, "schema")),
        patched(prom_text, "encode", watch.wrap(prom_text.encode, "encoder")),
    ):
        path = write_scenario(gpus, procs)
        runner = make_runner(path, cast(TextIO, LastText()))
        runner.source._nvml.lib = TimedLibrary(runner.source._nvml.lib, watch)  # type: ignore[attr-defined]
        runner.source.collect = watch.wrap(runner.source.collect, "collect")  # type: ignore[method-assign]
        runner.health.evaluate = watch.wrap(runner.health.evaluate, "health")  # type: ignore[method-assign]
        run = watch.wrap(runner.run, "cycle")
        peer = PeerExporter(TimedLibrary(load_nvml(load_scenario(path)), watch))
        scrape = watch.wrap(peer.scrape, "peer")
        for _ in range(3):
            run()
            scrape()
        settle_heap()
        per_cycle: list[dict[str, float]] = []
        for _ in range(cycles):
            watch.seconds.clear()
            run()
            scrape()
            per_cycle.append(dict(watch.seconds))
    parts = [_parts(c) for c in per_cycle]
    return {key: statistics.median(p[key] for p in parts) * 1000 for key in parts[0]}


def _parts(s: dict[str, float]) -> dict[str, float]:
    """One cycle's raw stage seconds as the parts of the table (derived per cycle, so that the
    medians of differences are taken, not differences of medians)."""
    get = s.get
    sim_readers, sim_source = get("sim:readers", 0.0), get("sim:collect", 0.0)
    collect, readers, health, schema, encoder = (
        get(k, 0.0) for k in ("collect", "readers", "health", "schema", "encoder")
    )
    return {
        "ours": s["cycle"],
        "ours NVML (simulator)": sim_readers + sim_source,
        "readers' own work": readers - sim_readers,
        "source around the readers": collect - readers - sim_source,
        "health": health,
        "schema": schema,
        "encoder": encoder,
        "rest of the cycle": s["cycle"] - collect - health - schema - encoder,
        "peer": s["peer"],
        "peer NVML (simulator)": get("sim:peer", 0.0),
        "peer's own work": s["peer"] - get("sim:peer", 0.0),
    }


def child(side: str, gpus: int, procs: int, cycles: int) -> None:
    """One side alone, for valgrind: the node and frozen heap of :func:`measure`, then ``cycles``. Ten
    warm-up cycles, not three: the synthetic node's series settle by the sixth, and the few cycles the
    median of :func:`measure` passes over would weigh on a count of ten."""
    path = write_scenario(gpus, procs)
    run: Callable[[], object]
    if side == "ours":
        run = make_runner(path, cast(TextIO, LastText())).run
    else:
        run = PeerExporter(load_nvml(load_scenario(path))).scrape
    for _ in range(10):
        run()
    settle_heap()
    for _ in range(cycles):
        run()


def instructions_per_cycle(side: str, gpus: int, procs: int, cycles: int) -> float:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    cmd = [sys.executable, __file__, "--child", side, str(gpus), str(procs)]
    return (instructions([*cmd, str(cycles)], env) - instructions([*cmd, "0"], env)) / cycles


PEER_MARK = b"# peer cycle\n"
SIDES = ("falcon_gpu", "peer", "peer --full")


def serve(side: str, interval: float) -> None:
    """``--serve``: the peer on the real bindings as its own process, a scrape every ``interval`` s,
    its text on stdout (a pipe the bench reads, as falcon_gpu's stdout sink writes into one)."""
    peer = PeerExporter(pynvml, full=side == "full")
    out = sys.stdout.buffer
    tick = time.monotonic()
    while True:
        out.write(peer.scrape())
        out.write(PEER_MARK)
        out.flush()
        tick += interval
        time.sleep(max(0.0, tick - time.monotonic()))


def _library_dir(lib: Path, where: Path) -> Path:
    """A folder with ``libnvidia-ml.so.1`` as a real symlink to ``lib`` (pynvml loads that name; a copied
    checkout may hold the mock's symlink as a text file naming its target)."""
    target = lib.resolve()
    if target.stat().st_size < 1024:
        target = lib.parent / target.read_text().strip()
    (where / "libnvidia-ml.so.1").symlink_to(target)
    return where


def _mock_profile(lib: Path, processes: int, where: Path) -> Path | None:
    """The mock's 8 x H100 profile beside ``lib`` with ``processes`` processes per GPU; None: no mock
    there (a real driver's library)."""
    shipped = lib.parent / "configs" / "mock-nvml-config-h100.yaml"
    if not shipped.exists():
        return None
    import yaml

    profile = yaml.safe_load(shipped.read_text())
    profile["device_defaults"]["processes"] = [
        {
            "pid": 4242 + i,
            "name": f"python{i}",
            "type": "C",
            "used_memory_mib": 1024 * (i + 1),
            "sm_util": 30 + i,
        }
        for i in range(processes)
    ]

    class Quoted(yaml.SafeDumper):  # the mock's README: quote every string
        pass

    Quoted.add_representer(str, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", v, style='"'))
    path = where / "profile.yaml"
    path.write_text(yaml.dump(profile, Dumper=Quoted, sort_keys=False))
    return path


def _side(side: str, interval: float, env: dict[str, str], where: Path) -> Counted:
    """One side running as its own process at ``interval``, its cycles counted from its output."""
    if side == "falcon_gpu":
        return Counted(agent_command(interval, where), env)
    cmd = [sys.executable, __file__, "--serve", "full" if "full" in side else "basic", str(interval)]
    return Counted(cmd, env, PEER_MARK)


def _measured(
    side: str, interval: float, env: dict[str, str], where: Path, window: float
) -> tuple[float, ...]:
    run = _side(side, interval, env, where)
    try:
        run.wait_cycles(1 if interval > window else 4)
        time.sleep(2)  # the first cycles' start-up work settled
        elapsed, threads, cycles = run.window(window)
        return elapsed, sum(threads.values()), cycles
    finally:
        run.stop()


def _thread_cpu_ms() -> dict[int, float]:
    """This process's threads: native id -> CPU ms (schedstat, nanoseconds)."""
    out: dict[int, float] = {}
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError, ValueError):  # the thread ended between listing and reading
            out[int(task.name)] = int((task / "schedstat").read_text().split()[0]) / 1e6
    return out


def agent_threads(interval: float, window: float, where: Path) -> None:
    """``--agent-threads``: ``falcon-gpu run`` in this process (its threads named, unlike from outside:
    CPython does not name OS threads); after a settling time, each thread's CPU in a ``window``,
    printed per second and per cycle, then exit. The unnamed threads are the NVML library's own
    (the mock's Go runtime)."""

    def watch() -> None:
        time.sleep(6)  # start-up and the first cycles settled
        before, t0 = _thread_cpu_ms(), time.monotonic()
        time.sleep(window)
        after, elapsed = _thread_cpu_ms(), time.monotonic() - t0
        names = {t.native_id: t.name for t in threading.enumerate()}
        cycles = elapsed / interval
        rows = [(names.get(tid, "(library thread)"), ms - before.get(tid, 0.0)) for tid, ms in after.items()]
        for name, ms in sorted(rows, key=lambda r: -r[1]):
            if name != "watch" and ms >= 0.05 * window:
                print(f"| {name} | {ms / elapsed:.2f} | {ms / cycles:.3f} |", file=sys.stderr)
        total = sum(ms for name, ms in rows if name != "watch")
        print(f"| all threads | {total / elapsed:.2f} | {total / cycles:.3f} |", file=sys.stderr)
        os._exit(0)

    from falcon_gpu.cli import main as falcon_main

    threading.Thread(target=watch, name="watch", daemon=True).start()
    sys.argv = agent_command(interval, where)[2:]
    falcon_main()


def threads_table(env: dict[str, str], where: Path, window: float) -> None:
    """``--threads``: where ``falcon-gpu run``'s CPU goes, per thread, at 0.5 s and at 60 s."""
    for interval in (0.5, 60.0):
        print(f"\nfalcon_gpu at {interval:g} s, {window:g} s window\n")
        print("| thread | ms/s | ms/cycle |\n|---|---|---|")
        cmd = [sys.executable, __file__, "--agent-threads", str(interval), str(window), str(where)]
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        print("\n".join(line for line in done.stderr.splitlines() if line.startswith("|")))


def real_bindings(lib: Path, processes: int, window: float, repeats: int, threads: bool = False) -> None:
    """Each side as its own process on the real pynvml over ``lib``: CPU per cycle = (CPU of all threads
    at a 0.5 s interval - the same at a 60 s interval, equal windows) / cycles, median of ``repeats``
    (the sides alternated in each repeat); the idle threads' cost (the 60 s run) on its own."""
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        (where / "lib").mkdir()
        lib_dir = _library_dir(lib, where / "lib")
        profile = _mock_profile(lib, processes, where)
        env = {**os.environ, "LD_LIBRARY_PATH": str(lib_dir), "NODE_NAME": "bench"}
        if profile is not None:
            env["MOCK_NVML_CONFIG"] = str(profile)
        if threads:
            threads_table(env, where, window)
            return
        per_cycle: dict[str, list[float]] = {side: [] for side in SIDES}
        idle: dict[str, list[float]] = {side: [] for side in SIDES}
        for _ in range(repeats):
            for side in SIDES:
                i_elapsed, i_cpu, i_cycles = _measured(side, 60, env, where, window)
                if i_cycles:
                    raise SystemExit("a cycle ran inside the idle window; use a shorter --window")
                b_elapsed, b_cpu, b_cycles = _measured(side, 0.5, env, where, window)
                idle_rate = i_cpu / i_elapsed
                per_cycle[side].append((b_cpu - idle_rate * b_elapsed) / b_cycles)
                idle[side].append(idle_rate)
        gpus = 8
        ours = statistics.median(per_cycle["falcon_gpu"])
        print(f"load average before/after: see `uptime`; {repeats} repeats, {window:g} s windows\n")
        print(
            "| side | CPU ms/cycle (median; all runs) | ms per GPU | falcon_gpu / side | idle threads ms/s |"
        )
        print("|---|---|---|---|---|")
        for side in SIDES:
            med = statistics.median(per_cycle[side])
            runs = ", ".join(f"{x:.2f}" for x in per_cycle[side])
            print(
                f"| {side} | {med:.2f} ({runs}) | {med / gpus:.3f} | {ours / med:.2f}x "
                f"| {statistics.median(idle[side]):.2f} |"
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=300)
    ap.add_argument("--nvml-lib", type=Path, help="run both sides on the real pynvml over this library")
    ap.add_argument("--processes", type=int, default=3, help="with --nvml-lib on the mock: per GPU")
    ap.add_argument("--window", type=float, default=15.0, help="with --nvml-lib: seconds per window")
    ap.add_argument("--repeats", type=int, default=3, help="with --nvml-lib")
    ap.add_argument("--serve", nargs=2, metavar=("SIDE", "INTERVAL"), help=argparse.SUPPRESS)
    ap.add_argument("--breakdown", action="store_true", help="also time each part of both sides")
    ap.add_argument("--instructions", action="store_true", help="also count instructions (valgrind)")
    ap.add_argument("--threads", action="store_true", help="with --nvml-lib: per thread instead")
    ap.add_argument("--agent-threads", nargs=3, metavar=("INTERVAL", "WINDOW", "DIR"), help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs=4, metavar=("SIDE", "GPUS", "PROCS", "CYCLES"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], *map(int, a.child[1:]))
        return
    if a.agent_threads:
        agent_threads(float(a.agent_threads[0]), float(a.agent_threads[1]), Path(a.agent_threads[2]))
        return
    if a.serve:
        serve(a.serve[0], float(a.serve[1]))
        return
    if a.nvml_lib:
        real_bindings(a.nvml_lib, a.processes, a.window, a.repeats, a.threads)
        return
    sizes = ((8, 64), (16, 256))
    print(
        "| node | falcon_gpu CPU ms/cycle | peer CPU ms/cycle | ratio (target <= 0.35) "
        "| NVML calls/GPU/cycle falcon_gpu / peer | text bytes falcon_gpu / peer |"
    )
    print("|---|---|---|---|---|---|")
    for gpus, procs in sizes:
        r = measure(gpus, procs, a.cycles)
        print(
            f"| {gpus} GPUs x {procs} processes | {r['ours_ms']:.2f} | {r['peer_ms']:.2f} "
            f"| {r['ours_ms'] / r['peer_ms']:.2f}x | {r['ours_calls']:.1f} / {r['peer_calls']:.1f} "
            f"| {r['ours_bytes']} / {r['peer_bytes']} |"
        )
    if a.instructions:
        print("\n| node | falcon_gpu instructions/cycle | peer instructions/cycle | ratio |")
        print("|---|---|---|---|")
        for gpus, procs in sizes:
            n = max(10, a.cycles // 10)  # valgrind is ~50x slower: a tenth of the cycles is plenty (exact)
            ours, peer = (instructions_per_cycle(side, gpus, procs, n) for side in ("ours", "peer"))
            row = f"{ours / 1e6:.2f} M | {peer / 1e6:.2f} M | {ours / peer:.2f}x"
            print(f"| {gpus} GPUs x {procs} processes | {row} |")
    if a.breakdown:
        parts = [breakdown(gpus, procs, a.cycles) for gpus, procs in sizes]
        print("\n| part, ms per cycle (wall, median) | " + " | ".join(f"{g} x {p}" for g, p in sizes) + " |")
        print("|---|" + "---|" * len(sizes))
        for key in parts[0]:
            cells = " | ".join(f"{p[key]:.2f} ({p[key] / p['peer']:.2f} of peer)" for p in parts)
            print(f"| {key} | {cells} |")


if __name__ == "__main__":
    main()
