"""The running agent's advice book: when it recomputes, what it keeps, and that it never costs a cycle."""

from __future__ import annotations

from pathlib import Path

from falcon_gpu.advice.book import AdviceBook
from falcon_gpu.agent.cycle import CycleRunner
from falcon_gpu.model.advice import Advice
from falcon_gpu.model.jobs import JobRecord
from falcon_gpu.model.snapshot import DeviceReading, Snapshot
from tests.jobs.helpers import UUID, Feeder, use

GIB = 1 << 30
MODEL = "NVIDIA H100 80GB HBM3"


def record(pod: str, end: float, memory_gib: int = 4) -> JobRecord:
    return JobRecord(namespace="ml", pod=pod, container="main", node="n", gpu_index=0, gpu_uuid=UUID,
                     gpu_model=MODEL, start=end - 60, end=end, energy_joules=1.0,
                     memory_max_bytes=memory_gib * GIB, memory_mean_bytes=GIB, cycles=6)  # fmt: skip


def snapshot(now: float) -> Snapshot:
    dev = DeviceReading(index=0, uuid=UUID, name=MODEL, pci_bus_id="0", memory_total_bytes=80 * GIB)
    return Snapshot(timestamp=now, nvml_ok=True, devices=(dev,))


def names(advice: tuple[Advice, ...]) -> dict[str, str]:
    return {a.workload: a.placement.name for a in advice}


def test_recomputed_every_n_cycles_or_when_a_job_ends_and_only_within_the_window() -> None:
    book = AdviceBook(recent=[record("web-0", end=1000)], window=700, every=3)
    running: list[JobRecord] = []
    assert names(book.observe(snapshot(1010), (), lambda: running, None)) == {"web": "shared-1/8"}
    running.append(record("api-0", end=1020, memory_gib=30))
    assert names(book.observe(snapshot(1020), (), lambda: running, None)) == {"web": "shared-1/8"}  # not due
    ended = (record("db-0", end=1030, memory_gib=60),)
    assert names(book.observe(snapshot(1030), ended, lambda: running, None)) == {
        "web": "shared-1/8", "api": "shared-1/2", "db": "gpu"}  # fmt: skip
    for now in (1700, 1710):
        book.observe(snapshot(now), (), lambda: [], None)
    assert names(book.observe(snapshot(1720), (), lambda: [], None)) == {"db": "gpu"}  # web ended > 700 s ago


class Broken(AdviceBook):
    def observe(self, *args: object, **kwargs: object) -> tuple[Advice, ...]:
        raise RuntimeError("bug")


class Source:
    def collect(self, timestamp: float) -> Snapshot:
        return snapshot(timestamp)


def test_a_failing_book_costs_the_advice_not_the_cycle(tmp_path: Path) -> None:
    feed = Feeder(tmp_path)
    runner = CycleRunner(node="n", step=1, source=Source(), attributor=None, sinks=[],
                         telemetry=feed.telemetry, jobs=feed.tracker, advice=Broken())  # fmt: skip
    rendered = runner.run()
    assert rendered.cycle.advice == ()
    assert feed.telemetry.view().errors_total.get("jobs") == 1
    feed.cycle([use("trainer", memory=GIB)])  # the tracker still works
