"""The agent's own series (``falcon_gpu_agent_*``), from the telemetry counters."""

from __future__ import annotations

from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.samples import Labels
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec, without_empty
from falcon_gpu.schemas.label_cache import Kept, LabelCache

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


class AgentLabels(Kept):
    """The agent series' label tuples one renderer keeps (:mod:`falcon_gpu.schemas.label_cache`)."""

    __slots__ = ("readers", "series")

    def __init__(self) -> None:
        self.series: LabelCache[tuple[Labels, tuple[tuple[str, str], ...]], Labels] = LabelCache(_with)
        """(node labels, what a series adds: its error kind, sink, outcome or reader) -> the series'
        labels, built once (the same few come back every cycle; their values change)."""
        self.readers: LabelCache[tuple[Labels, tuple[str, ...]], tuple[Labels, ...]] = LabelCache(
            lambda key: tuple(_with((key[0], (("reader", reader),))) for reader in key[1])
        )
        """(node labels, the readers' names in order) -> each reader's series labels: the same readers
        every cycle, so one look-up a cycle instead of one per reader."""


_CYCLE_SECONDS, _CYCLES, _ERRORS, _SAMPLES, _SPOOL, _READER_SUCCESS, _READER_SECONDS = (s.name for s in SPECS)


def add_agent(b: FamilyBuilder, cycle: CycleData, kept: AgentLabels) -> None:
    t = cycle.telemetry
    node = cycle.base_labels
    labels = kept.series.get
    b.add(_CYCLE_SECONDS, node, t.last_cycle_seconds)
    b.add(_CYCLES, node, t.cycles_total)
    for kind, n in sorted(t.errors_total.items()):
        b.put(_ERRORS, labels((node, (("kind", kind),))), n)
    for (sink, outcome), n in sorted(t.samples_total.items()):
        b.put(_SAMPLES, labels((node, (("sink", sink), ("outcome", outcome)))), n)
    for sink, n in sorted(t.spool_bytes.items()):
        b.put(_SPOOL, labels((node, (("sink", sink),))), n)
    readers = t.readers
    if readers:
        reader_labels = kept.readers.get((node, tuple(readers)))
        ok_labels, ok_values = b.column(_READER_SUCCESS)
        seconds_labels, seconds_values = b.column(_READER_SECONDS)
        ok_labels.extend(reader_labels)
        seconds_labels.extend(reader_labels)
        for ok, seconds in readers.values():
            ok_values.append(float(ok))
            seconds_values.append(float(seconds))
