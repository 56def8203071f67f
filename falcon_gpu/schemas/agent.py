"""The agent's own series (``falcon_gpu_agent_*``), from the telemetry counters."""

from __future__ import annotations

from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.samples import Labels
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec, without_empty
from falcon_gpu.schemas.label_cache import LabelCache

P = "falcon_gpu_agent_"

SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(P + "cycle_seconds", "gauge", "Wall time of the previous collection cycle."),
    MetricSpec(P + "cycles_total", "counter", "Cycles completed."),
    MetricSpec(
        P + "errors_total", "counter", "Errors by kind (nvml_init, gpu, kubelet, sink, cycle_overrun, ...)."
    ),
    MetricSpec(P + "samples_total", "counter", "Samples per sink by outcome: sent, spooled or dropped."),
    MetricSpec(P + "spool_bytes", "gauge", "Bytes in the sink's durable spool."),
    MetricSpec(P + "reader_success", "gauge", "1 if the NVML reader succeeded on every GPU last cycle."),
    MetricSpec(P + "reader_seconds", "gauge", "Seconds the NVML reader took last cycle, over all GPUs."),
)


def _with(key: tuple[Labels, tuple[tuple[str, str], ...]]) -> Labels:
    return without_empty((*key[0], *key[1]))


_LABELS: LabelCache[tuple[Labels, tuple[tuple[str, str], ...]], Labels] = LabelCache(_with, limit=1024)
"""(node labels, what a series adds: its error kind, sink, outcome or reader) -> the series' labels,
built once (the same few come back every cycle; their values change)."""


def add_agent(b: FamilyBuilder, cycle: CycleData) -> None:
    t = cycle.telemetry
    node = cycle.base_labels
    labels = _LABELS.get
    b.add(P + "cycle_seconds", node, t.last_cycle_seconds)
    b.add(P + "cycles_total", node, t.cycles_total)
    for kind, n in sorted(t.errors_total.items()):
        b.put(P + "errors_total", labels((node, (("kind", kind),))), n)
    for (sink, outcome), n in sorted(t.samples_total.items()):
        b.put(P + "samples_total", labels((node, (("sink", sink), ("outcome", outcome)))), n)
    for sink, n in sorted(t.spool_bytes.items()):
        b.put(P + "spool_bytes", labels((node, (("sink", sink),))), n)
    for reader, (ok, seconds) in t.readers.items():
        lb = labels((node, (("reader", reader),)))
        b.put(P + "reader_success", lb, ok)
        b.put(P + "reader_seconds", lb, seconds)
