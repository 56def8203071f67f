"""The process-utilisation samples' short way (one sample per PID, all newer than lastSeen, percents
already converted, engines idle) answers what the general rules answer, and every answer that is not the
usual one leaves it for the general averaging loop: a PID sampled twice, a sample already used, a
percent not converted yet; a busy engine stays on the short way and still says which engine."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

from falcon_gpu.model.snapshot import ProcessReading
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.sources.nvml.direct import PynvmlCalls
from falcon_gpu.sources.nvml.readers import processes
from falcon_gpu.sources.nvml.readers.base import ProcessSamples
from falcon_gpu.sources.nvml.slow import REFRESH_S
from tests.nvml.helpers import GIB, Quirky, gpu, scenario_of, source_on

NOW = 1000.0
NOW_US = 1_000_000_000


def sample(pid: int, stamp: int, sm: Any, enc: int = 0, dec: int = 0) -> SimpleNamespace:
    return SimpleNamespace(pid=pid, timeStamp=stamp, smUtil=sm, memUtil=0, encUtil=enc, decUtil=dec)


class _Answers:
    """An ``nvml.call`` stand-in that answers the given samples (what _samples asks of its context)."""

    def __init__(self, samples: list[SimpleNamespace]) -> None:
        self.samples = samples
        self.asked: list[int] = []

    def call(self, scope: str, field: str, fn_name: str, handle: Any, last_seen: int, answers: Any) -> Any:
        self.asked.append(last_seen)
        return self.samples


def _ctx(samples: list[SimpleNamespace], last_seen: int) -> Any:
    nvml = _Answers(samples)
    return SimpleNamespace(
        scope="GPU-x", last_seen_us={"GPU-x": last_seen}, nvml=nvml, calls=PynvmlCalls(nvml),  # type: ignore[arg-type]
        handle=None, timestamp=NOW,
    )  # fmt: skip


def _general(samples: list[SimpleNamespace], last_seen: int) -> tuple[ProcessSamples, int]:
    """What the general rules answer, and the lastSeen they leave."""
    ctx = _ctx(samples, last_seen)
    answer = processes._averaged(ctx, samples, last_seen, max(last_seen, NOW_US))
    return answer, ctx.last_seen_us["GPU-x"]


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the general loop's runs (one entry per run: the number of samples it was given)."""
    runs: list[int] = []
    general = processes._averaged

    def counted(ctx: Any, samples: Any, last_seen: int, newest: int) -> ProcessSamples:
        runs.append(len(samples))
        return general(ctx, samples, last_seen, newest)

    monkeypatch.setattr(processes, "_averaged", counted)
    monkeypatch.setattr(processes, "_SHARES", {percent: percent / 100 for percent in range(101)})
    return runs


def _read(samples: list[SimpleNamespace], last_seen: int = NOW_US - 30_000_000) -> tuple[ProcessSamples, int]:
    ctx = _ctx(samples, last_seen)
    return processes._samples(ctx), ctx.last_seen_us["GPU-x"]


def test_the_usual_answer_takes_the_short_way_and_reads_as_the_general_rules(spied: list[int]) -> None:
    usual = [sample(11, NOW_US - 5, 40), sample(12, NOW_US - 3, 0), sample(13, NOW_US - 9, 100)]
    answer, last_seen = _read(usual)
    assert spied == []
    assert answer.sm_by_pid == {11: 0.4, 12: 0.0, 13: 1.0}
    assert list(answer.sm_by_pid or {}) == [11, 12, 13]  # the samples' order, as the general loop keeps
    assert (answer.encoder_in_use, answer.decoder_in_use) == (False, False)
    assert last_seen == NOW_US  # no sample after the cycle's time: lastSeen is the cycle's time
    assert (answer, last_seen) == _general(usual, NOW_US - 30_000_000)


def test_a_sample_after_the_cycle_time_moves_last_seen_to_it_on_the_short_way(spied: list[int]) -> None:
    later = [sample(11, NOW_US + 70, 40), sample(12, NOW_US + 250, 10), sample(13, NOW_US + 90, 20)]
    answer, last_seen = _read(later)
    assert spied == [] and last_seen == NOW_US + 250
    assert (answer, last_seen) == _general(later, NOW_US - 30_000_000)


def test_busy_engines_stay_on_the_short_way_and_say_which_engine(spied: list[int]) -> None:
    encoding = [sample(11, NOW_US - 5, 40), sample(12, NOW_US - 4, 10, enc=35)]
    decoding = [sample(11, NOW_US - 5, 40, dec=1), sample(12, NOW_US - 4, 10)]
    both = [sample(11, NOW_US - 5, 40, dec=7), sample(12, NOW_US - 4, 10, enc=2)]
    seen = [_read(answer)[0] for answer in (encoding, decoding, both)]
    assert spied == []
    assert [(s.encoder_in_use, s.decoder_in_use) for s in seen] == [
        (True, False),
        (False, True),
        (True, True),
    ]
    assert all(s.sm_by_pid == {11: 0.4, 12: 0.1} for s in seen)


@pytest.mark.parametrize(
    ("case", "samples", "shares"),
    [
        (  # a PID sampled several times: the mean of its samples
            "duplicates",
            [sample(11, NOW_US - 9, 20), sample(12, NOW_US - 8, 50), sample(11, NOW_US - 5, 40)],
            {11: pytest.approx(0.3), 12: 0.5},
        ),
        (  # a sample already used (not newer than lastSeen) does not count, here the last one
            "old sample",
            [sample(11, NOW_US - 9, 20), sample(12, NOW_US - 8, 50), sample(13, NOW_US - 30_000_000, 90)],
            {11: 0.2, 12: 0.5},
        ),
        (  # the old one first, and a PID whose only sample is old
            "old first",
            [sample(13, NOW_US - 40_000_000, 90), sample(11, NOW_US - 9, 20)],
            {11: 0.2},
        ),
        (  # a percent the table has not converted yet (here: not a whole percent)
            "odd percent",
            [sample(11, NOW_US - 9, 20), sample(12, NOW_US - 8, 12.5)],
            {11: 0.2, 12: 0.125},
        ),
    ],
)
def test_an_answer_that_is_not_the_usual_one_is_read_by_the_general_rules(
    spied: list[int], case: str, samples: list[SimpleNamespace], shares: dict[int, Any]
) -> None:
    answer, last_seen = _read(samples)
    assert spied == [len(samples)], case  # left the short way once, to the general loop
    assert answer.sm_by_pid == shares
    assert last_seen == NOW_US
    assert (answer, last_seen) == _general(samples, NOW_US - 30_000_000)


def test_a_percent_that_is_not_whole_is_converted_by_the_general_way_each_time(spied: list[int]) -> None:
    odd = [sample(11, NOW_US - 9, 12.5)]
    assert _read(odd)[0].sm_by_pid == {11: 0.125} and spied == [1]
    assert _read(odd)[0].sm_by_pid == {11: 0.125} and spied == [1, 1]  # the table (whole percents) stays
    assert _read([sample(11, NOW_US - 9, 12)])[0].sm_by_pid == {11: 0.12} and spied == [1, 1]


def test_no_samples_at_all_is_the_short_way_with_no_shares(spied: list[int]) -> None:
    answer, last_seen = _read([])
    assert (answer.sm_by_pid, answer.encoder_in_use, answer.decoder_in_use, last_seen) == (
        {},
        False,
        False,
        NOW_US,
    )
    assert spied == []


def test_random_answers_read_as_the_general_rules_whichever_way_they_take(spied: list[int]) -> None:
    """Property check: many answers, usual and not, with every quirk mixed in at random."""
    rng = random.Random(9)
    last_seen = NOW_US - 30_000_000
    general = 0  # the answers that left the short way
    for _ in range(400):
        pids = rng.sample(range(1, 60), rng.randint(0, 12))
        if pids and rng.random() < 0.3:
            pids.append(rng.choice(pids))  # a PID sampled twice
        samples = [
            sample(
                pid,
                rng.choice([last_seen - 1, last_seen, last_seen + 1, NOW_US - 7, NOW_US, NOW_US + 40])
                if rng.random() < 0.2
                else rng.randint(last_seen + 1, NOW_US),
                rng.choice([rng.randint(0, 100), rng.randint(0, 100) + 0.5])
                if rng.random() < 0.1
                else rng.randint(0, 100),
                enc=rng.choice([0, 0, 0, 5]),
                dec=rng.choice([0, 0, 0, 3]),
            )
            for pid in pids
        ]
        before = len(spied)
        read = _read(samples, last_seen)
        general += len(spied) > before
        assert read == _general(samples, last_seen), samples
    assert 0 < general < 400  # both ways taken


def test_end_to_end_a_pid_sampled_twice_is_averaged_and_the_next_usual_cycle_reads_right() -> None:
    """Through the source: a usual cycle, a cycle whose answer has a PID twice and an old sample, and a
    usual cycle again; the shares each cycle and lastSeen asked each time."""
    sim = SimulatedNvml(scenario_of(gpu(processes=[
        {"pid": 1, "name": "a", "used_memory_bytes": GIB},
        {"pid": 2, "name": "b", "used_memory_bytes": GIB},
    ])))  # fmt: skip
    answers: list[list[SimpleNamespace]] = [
        [sample(1, 999_000_000, 30), sample(2, 999_500_000, 70)],
        [  # PID 2's first sample was used last cycle (at lastSeen), PID 1 twice: their mean
            sample(2, 1_000_000_000, 90),
            sample(1, 1_005_000_000, 30),
            sample(1, 1_010_000_000, 50),
            sample(2, 1_020_000_000, 70),
        ],
        [sample(2, 1_035_000_000, 25), sample(1, 1_040_000_000, 35)],
    ]
    asked: list[int] = []

    def utilisation(handle: Any, last_seen: int) -> Any:
        asked.append(last_seen)
        return answers.pop(0)

    source, telemetry = source_on(Quirky(sim, override={"nvmlDeviceGetProcessUtilization": utilisation}))
    shares = [
        {p.pid: p.sm_util_ratio for p in source.collect(now).devices[0].processes}
        for now in (1000.0, 1030.0, 1060.0)
    ]
    assert shares == [{1: 0.3, 2: 0.7}, {1: pytest.approx(0.4), 2: 0.7}, {1: 0.35, 2: 0.25}]
    assert asked == [0, 1_000_000_000, 1_030_000_000]
    assert telemetry.view().errors_total == {}


GRAPHICS_LIST = "nvmlDeviceGetGraphicsRunningProcesses_v3"
MPS_LIST = "nvmlDeviceGetMPSComputeRunningProcesses_v3"


def test_a_list_asked_again_that_reads_the_same_keeps_the_whole_tuple_and_is_not_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An MPS server's node: the MPS list is asked every cycle (a new list, the same processes), the
    graphics list once a minute. Each cycle hands out the first cycle's tuple; a list is read into a
    signature only the cycle it was asked (a gate that did not ask hands out the answer already read)."""
    sim = SimulatedNvml(scenario_of(gpu(memory_total_bytes=40 * GIB, memory_used_bytes=3 * GIB, processes=[
        {"pid": 20, "name": "nvidia-cuda-mps-server", "type": "compute", "used_memory_bytes": GIB,
         "sm_util_percent": 10},
        {"pid": 21, "name": "client", "type": "mps", "used_memory_bytes": GIB, "sm_util_percent": 30},
    ])))  # fmt: skip
    signed: list[Any] = []
    signature = processes._signature

    def counted(found: Any) -> Any:
        signed.append(found)
        return signature(found)

    monkeypatch.setattr(processes, "_signature", counted)
    source, telemetry = source_on(sim)
    seen = []
    for t in (0.0, 10.0, 20.0, REFRESH_S + 5, REFRESH_S + 15):
        before = (len(signed), sim.calls.get(GRAPHICS_LIST, 0), sim.calls.get(MPS_LIST, 0))
        processes_now = source.collect(1000.0 + t).devices[0].processes
        after = (len(signed), sim.calls.get(GRAPHICS_LIST, 0), sim.calls.get(MPS_LIST, 0))
        seen.append((processes_now, *(b - a for a, b in zip(before, after, strict=True))))
    # per cycle: signatures built, graphics asked, MPS asked
    assert [counts for _, *counts in seen] == [[3, 1, 1], [2, 0, 1], [2, 0, 1], [3, 1, 1], [2, 0, 1]]
    first = seen[0][0]
    assert all(processes_now is first for processes_now, *_ in seen)
    assert first == (
        ProcessReading(20, "nvidia-cuda-mps-server", ("compute",), GIB, 0.1, None, None),
        ProcessReading(21, "client", ("mps",), GIB, 0.3, None, None),
    )
    assert telemetry.view().errors_total == {}
