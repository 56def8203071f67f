"""The readers' fast paths (issue 9: the readers' own CPU per cycle) give what the general paths give:
the field-values answer decoded by one struct call per request shape, a GPU without NVLink doing
nothing for NVLink after its first cycle, the process names asked once per PID, the clock event
reason sets built once per mask."""

from __future__ import annotations

from typing import Any

import pynvml
import pytest

from falcon_gpu.model.snapshot import (
    EccCounts,
    NvlinkErrors,
    ProcessReading,
    RemappedRows,
    RetiredPages,
    Snapshot,
)
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.sources.nvml import field_values
from falcon_gpu.sources.nvml.calls import NvmlCaller
from falcon_gpu.sources.nvml.field_values import NVLINK, FieldValues
from falcon_gpu.sources.nvml.process_names import ProcessNames
from falcon_gpu.sources.nvml.readers import clocks, interconnect
from tests.nvml.helpers import GIB, gpu, scenario_named, scenario_of, source_on
from tests.nvml.test_nvml_interconnect import link
from tests.nvml.test_nvml_readers import FULL

TYPES = {  # value type -> (union member, a number that needs that type's decoding)
    pynvml.NVML_VALUE_TYPE_DOUBLE: ("dVal", 2.5),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: ("uiVal", 4_000_000_000),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: ("ulVal", 1 << 40),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: ("ullVal", (1 << 63) + 5),
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: ("sllVal", -7),
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: ("siVal", -3),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: ("usVal", 65535),
}


def _array(types: list[int], returns: list[int] | None = None) -> Any:
    values = (pynvml.c_nvmlFieldValue_t * len(types))()
    for i, value_type in enumerate(types):
        member, number = TYPES[value_type]
        values[i].fieldId, values[i].valueType = 100 + i, value_type
        values[i].nvmlReturn = pynvml.NVML_SUCCESS if returns is None else returns[i]
        setattr(values[i].value, member, number)
    return values


def _members(values: Any) -> list[Any]:
    """What pynvml's structs say, member by member (counters exact ints, every other type a float)."""
    out = []
    for v in values:
        number = getattr(v.value, field_values.VALUE_ATTR[v.valueType])
        out.append(number if v.valueType == pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG else float(number))
    return out


def _request(count: int) -> Any:
    specs = [field_values.FieldSpec(f"f{i}", 100 + i) for i in range(count)]
    return FieldValues(NvmlCaller(SimulatedNvml(scenario_of(gpu()))))._build("GPU-a", tuple(specs))


def test_the_decoder_gives_what_pynvml_s_struct_members_give_for_every_value_type() -> None:
    types = list(TYPES)
    request = _request(len(types))
    values = _array(types)
    numbers, odd = request.decode(values)
    want = _members(values)
    assert numbers[:-1] == want and list(map(type, numbers[:-1])) == list(map(type, want)) and odd == []
    assert numbers[3] == (1 << 63) + 5 and isinstance(numbers[3], int)  # exact ints
    assert numbers[4] == -7.0 and numbers[0] == 2.5 and numbers[5] == -3.0 and numbers[6] == 65535.0
    again = _array(list(reversed(types)))  # the same request answered with other value types: laid out anew
    renumbered, _ = request.decode(again)
    assert renumbered[:-1] == _members(again) and list(map(type, renumbered[:-1])) == list(
        map(type, _members(again))
    )


def test_the_decoder_honours_each_value_s_code() -> None:
    ull = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
    request = _request(3)
    assert request.decode(_array([ull] * 3)) == ([(1 << 63) + 5] * 3 + [None], [])
    not_found = [pynvml.NVML_SUCCESS, pynvml.NVML_ERROR_NOT_FOUND, pynvml.NVML_SUCCESS]
    numbers, odd = request.decode(_array([ull] * 3, not_found))
    assert numbers == [(1 << 63) + 5, None, (1 << 63) + 5, None]
    assert odd == [(1, ull, pynvml.NVML_ERROR_NOT_FOUND)]
    unknown = _array([ull] * 3)
    unknown[2].valueType = 99
    assert request.decode(unknown)[1] == [(2, 99, pynvml.NVML_SUCCESS)]  # a type not known here: None


def test_steady_cycles_lay_the_answer_out_once(monkeypatch: pytest.MonkeyPatch) -> None:
    relayouts: list[int] = []
    real = field_values._Request._relayout

    def counting(self: Any, words: Any) -> None:
        relayouts[-1] += 1
        real(self, words)

    monkeypatch.setattr(field_values._Request, "_relayout", counting)
    snaps = _six_cycles(monkeypatch, scenario_named("mixed-4gpu"), relayouts)
    assert any(d.energy_joules for s in snaps for d in s.devices)  # values really came through
    assert relayouts[0] > 0 and relayouts[2:] == [0, 0, 0, 0]  # learning cycles only


def _six_cycles(monkeypatch: pytest.MonkeyPatch, scenario: Any, counts: list[int]) -> list[Snapshot]:
    """Six cycles of ``scenario`` (``counts`` gets a 0 before each, for the patches to count in), then
    the patches undone."""
    source, _ = source_on(SimulatedNvml(scenario))
    snaps = []
    for t in range(6):
        counts.append(0)
        snaps.append(source.collect(1000.0 + 10 * t))
    monkeypatch.undo()
    return snaps


def test_a_gpu_without_nvlink_does_nothing_for_nvlink_after_its_first_cycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source, telemetry = source_on(_two_gpus())
    first = source.collect(1000.0)
    touched: list[str] = []
    real = interconnect._nvlink

    def nvlink(batch: Any, values: Any, dl: Any) -> Any:
        touched.append(batch._scope)
        return real(batch, values, dl)

    monkeypatch.setattr(interconnect, "_nvlink", nvlink)
    second = source.collect(1010.0)
    assert touched == ["GPU-b"]  # GPU-a's NVLink fields were all refused in the first cycle
    a, b = second.devices
    assert (a.pcie_tx_bytes, a.pcie_tx_bytes_per_second, a.nvlink_errors, a.nvlink) == (3000, 200.0, None, ())
    assert first.devices[0].nvlink_errors is None and b.nvlink_errors == NvlinkErrors(0, 0, 2, 0)
    assert telemetry.view().errors_total == {}


def test_any_asked_is_asked_again_once_the_refused_fields_are_forgotten() -> None:
    sim = SimulatedNvml(scenario_of(gpu()))
    source, _ = source_on(sim)
    source.collect(1000.0)
    values: FieldValues = source._field_values
    assert not values.any_asked("GPU-a", "nvlink", NVLINK)
    source.caller.forget_not_supported("GPU-a")  # as after a MIG mode change
    assert values.any_asked("GPU-a", "nvlink", NVLINK)


class _Names:
    def __init__(self) -> None:
        self.asked: list[int] = []

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        self.asked.append(pid)
        if pid == 3:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return f"p{pid}"


def test_process_names_are_asked_once_per_pid_kept_while_it_runs_and_capped() -> None:
    lib = _Names()
    names = ProcessNames(NvmlCaller(lib), max_names=3)
    assert [names.get(p) for p in (1, 2, 3, 1, 3)] == ["p1", "p2", None, "p1", None]
    assert lib.asked == [1, 2, 3]  # twice in a cycle (MPS gate, then the readings): asked once
    names.end_cycle()
    assert [names.get(p) for p in (2, 1)] == ["p2", "p1"] and lib.asked == [1, 2, 3]
    names.end_cycle()  # 3 was not seen in that cycle: gone, asked again when it comes back
    assert names.get(3) is None and lib.asked == [1, 2, 3, 3] and len(names) == 3
    capped = ProcessNames(NvmlCaller(lib), max_names=1)
    assert [capped.get(p) for p in (5, 4, 4, 5)] == ["p5", "p4", "p4", "p5"]  # over the cap: not kept
    assert lib.asked[4:] == [5, 4, 4]


def test_held_names_are_kept_for_the_cycle_as_asking_would_keep_them() -> None:
    """:meth:`ProcessNames.held` (a GPU whose readings are last cycle's): the PIDs of the last cycle move
    over without a call, a PID asked this cycle already counts as held, one not known is refused (the
    caller asks), and the cap holds."""
    lib = _Names()
    names = ProcessNames(NvmlCaller(lib), max_names=4)
    assert [names.get(p) for p in (1, 2, 3)] == ["p1", "p2", None]  # 3 has no name: None is kept too
    names.end_cycle()
    assert names.get(2) == "p2" and names.held(frozenset({1, 2})) and lib.asked == [1, 2, 3]
    names.end_cycle()  # 3 was neither asked nor held: gone; 1 and 2 stay without a call
    assert not names.held(frozenset({1, 3})) and [names.get(p) for p in (1, 2, 3)] == ["p1", "p2", None]
    assert lib.asked == [1, 2, 3, 3]
    names.end_cycle()
    assert not ProcessNames(NvmlCaller(lib), max_names=1).held(frozenset({1}))  # nothing known yet
    assert names.held(frozenset({1, 2, 3})) and len(names) == 3 and lib.asked == [1, 2, 3, 3]
    names.end_cycle()
    assert [names.get(p) for p in (9, 8)] == ["p9", "p8"]  # 4 kept at most: only two more fit
    assert not names.held(frozenset({1, 2, 3}))


def test_clock_event_reason_sets_are_built_once_per_mask_and_source() -> None:
    sim = SimulatedNvml(scenario_of(gpu(clock_event_reasons=["idle", "sw_power_cap"])))
    source, _ = source_on(sim)
    first, second = (source.collect(1000.0 + 100 * t).devices[0].clock_event_reasons for t in range(2))
    assert first == frozenset({"idle", "sw_power_cap"}) and second is first
    other, _ = source_on(SimulatedNvml(scenario_of(gpu(clock_event_reasons=["idle", "sw_power_cap"]))))
    assert other.collect(1000.0).devices[0].clock_event_reasons is not first  # nothing shared
    assert clocks.reasons_from_mask(0x100) == frozenset({"display_clocks"})


def _two_gpus() -> SimulatedNvml:
    return SimulatedNvml(scenario_of(
        gpu(pcie={"tx_bytes": [1000, 3000], "rx_bytes": 2}),
        gpu("GPU-b", pcie={"tx_bytes": 5, "rx_bytes": 6}, nvlink=[link(0, replay_errors=[0, 2])],
            temperature_celsius=50),
    ))  # fmt: skip


def test_a_wrong_reader_still_costs_only_its_own_fields_where_it_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source, telemetry = source_on(_two_gpus())
    source.collect(1000.0)
    # a str where bytes belong
    monkeypatch.setattr(interconnect, "_nvlink", lambda batch, values: ("x", "y", [None] * 4, []))
    a, b = source.collect(1010.0).devices
    assert a.pcie_tx_bytes == 3000  # no NVLink: the broken part is not reached
    assert b.pcie_tx_bytes is None and b.nvlink_errors is None  # the interconnect reader's fields only
    assert b.temperature_celsius == 50.0 and b.processes == ()
    assert telemetry.view().errors_total == {"nvml_field": 1}


_DISTINCT = scenario_of(
    {**FULL, "uuid": "GPU-full"},
    gpu("GPU-plain", not_supported=["slowdown_tlimit_celsius"], power_watts=300, pcie_replays=4,
        ecc={"corrected_volatile": 5, "uncorrected_volatile": 6, "corrected_aggregate": 7,
             "uncorrected_aggregate": 9},
        remapped_rows={"correctable": 1, "uncorrectable": 2, "pending": False, "failed": True}),
)  # fmt: skip
"""Every health number distinct (a field taken from the wrong position shows), and a GPU that lacks a
declared thermal field (the thermal/power group's partial path)."""


@pytest.mark.parametrize("name", ["distinct", "mixed-4gpu"])
def test_field_groups_read_every_number_from_its_place(name: str) -> None:
    """The health reader's one look-up and the thermal/power reader's groups (some of their fields not
    supported on some GPUs) give each reading its own number, with real values in it."""
    scenario = _DISTINCT if name == "distinct" else scenario_named(name)
    source, _ = source_on(SimulatedNvml(scenario))
    grouped = [source.collect(1000.0 + 10 * t) for t in range(6)]
    devices = [d for s in grouped[1:] for d in s.devices]
    assert any(d.ecc is not None and d.remapped_rows is not None for d in devices)
    assert any(d.slowdown_tlimit_celsius is not None for d in devices)
    assert any(d.slowdown_tlimit_celsius is None and d.power_watts for d in devices)
    if name == "distinct":
        last = {d.uuid: d for d in grouped[-1].devices}
        full, plain = last["GPU-full"], last["GPU-plain"]
        assert full.ecc == EccCounts(1, 0, 8, 2) and plain.ecc == EccCounts(5, 6, 7, 9)
        assert full.retired_pages == RetiredPages(2, 1, True)
        assert full.remapped_rows == RemappedRows(3, 1, True, False)
        assert plain.remapped_rows == RemappedRows(1, 2, False, True)
        assert (full.pcie_replays, plain.pcie_replays) == (3, 4)
        assert (full.slowdown_tlimit_celsius, full.shutdown_tlimit_celsius) == (-2.0, -8.0)
        assert (plain.slowdown_tlimit_celsius, plain.power_watts) == (None, 300.0)
        assert (full.memory_temperature_celsius, full.energy_joules) == (70.0, 1020.0)


def test_an_unchanged_process_is_last_cycle_s_reading_and_a_change_is_a_new_one() -> None:
    """Per process (PID and instance): the same :class:`ProcessReading` object while name, types,
    memory and share stay; a new, correct one when any of them moves; an exited process is not kept."""
    sim = SimulatedNvml(scenario_of(gpu(processes=[
        {"pid": 11, "name": "steady", "type": "compute", "used_memory_bytes": GIB, "sm_util_percent": 10},
        {"pid": 12, "name": "busy", "type": "compute", "used_memory_bytes": GIB,
         "sm_util_percent": [10, 10, 30, 30]},
        {"pid": 13, "name": "grows", "type": "compute", "used_memory_bytes": [GIB, GIB, GIB, 2 * GIB],
         "sm_util_percent": 10},
        {"pid": 14, "name": "both", "type": "compute", "used_memory_bytes": GIB, "sm_util_percent": 10},
        {"pid": 14, "name": "both", "type": "graphics", "used_memory_bytes": GIB, "from_cycle": 2},
        {"pid": 15, "name": "short", "type": "compute", "used_memory_bytes": GIB, "sm_util_percent": 10,
         "until_cycle": 2},
    ])))  # fmt: skip
    source, _ = source_on(sim)
    cycles = [{p.pid: p for p in source.collect(1000.0 + 10 * t).devices[0].processes} for t in range(4)]
    first, second, third, fourth = cycles
    assert all(second[pid] is first[pid] for pid in (11, 12, 13, 14, 15))  # nothing changed
    assert third[11] is first[11] and third[13] is first[13] and 15 not in third
    assert third[12] is not first[12] and third[12].sm_util_ratio == pytest.approx(0.3)
    assert third[14] is not first[14] and third[14].types == ("compute", "graphics")
    assert fourth[14] is third[14] and fourth[12] is third[12]
    assert fourth[13] is not first[13] and fourth[13].used_memory_bytes == 2 * GIB
    assert first[12] == second[12] and third[12] == ProcessReading(
        12, "busy", ("compute",), GIB, 0.3, None, None
    )
    kept = source._state.kept_processes
    assert set(next(iter(kept.values()))) == {(pid, None, None) for pid in (11, 12, 13, 14)}


def test_a_gpu_whose_lists_and_samples_did_not_move_gets_last_cycle_s_whole_tuple() -> None:
    """The steady training node: the same process tuple object, its names kept alive without asking
    NVML again; a new tuple, right in every field, the cycle a list's memory, a share, the graphics list
    or the MPS list moves, and when a name was dropped (looked up again, as the general path does)."""
    sim = SimulatedNvml(scenario_of(gpu(processes=[
        {"pid": 21, "name": "train", "type": "compute", "used_memory_bytes": GIB, "sm_util_percent": 40},
        {"pid": 22, "name": "grows", "type": "compute", "used_memory_bytes": [GIB] * 3 + [2 * GIB] * 9,
         "sm_util_percent": 40},
        {"pid": 23, "name": "busier", "type": "compute", "used_memory_bytes": GIB,
         "sm_util_percent": [40] * 5 + [60] * 7},
        {"pid": 24, "name": "viewer", "type": "graphics", "used_memory_bytes": GIB, "from_cycle": 7,
         "sm_util_percent": 5},
    ])))  # fmt: skip
    source, _ = source_on(sim)
    seen = []
    for t in range(10):
        names_before = sim.calls.get("nvmlSystemGetProcessName", 0)
        seen.append((source.collect(1000.0 + 10 * t).devices[0].processes,
                     sim.calls.get("nvmlSystemGetProcessName", 0) - names_before))  # fmt: skip
        if t == 8:
            source._names._before.pop(21)  # as if the cap had kept it out: asked again, a new tuple
    tuples = [t for t, _ in seen]
    assert [asked for _, asked in seen] == [3, 0, 0, 0, 0, 0, 0, 1, 0, 1]
    assert tuples[1] is tuples[0] and tuples[2] is tuples[0]
    assert tuples[3] is not tuples[2] and {p.pid: p.used_memory_bytes for p in tuples[3]}[22] == 2 * GIB
    assert tuples[4] is tuples[3]
    assert tuples[5] is not tuples[4]
    assert {p.pid: p.sm_util_ratio for p in tuples[5]}[23] == pytest.approx(0.6)
    assert tuples[6] is tuples[5]
    assert tuples[7] is not tuples[6] and [(p.pid, p.types) for p in tuples[7]][-1] == (24, ("graphics",))
    assert tuples[8] is tuples[7]
    assert tuples[9] is not tuples[8] and tuples[9] == tuples[8]
    assert tuples[8] == (
        ProcessReading(21, "train", ("compute",), GIB, 0.4, None, None),
        ProcessReading(22, "grows", ("compute",), 2 * GIB, 0.4, None, None),
        ProcessReading(23, "busier", ("compute",), GIB, 0.6, None, None),
        ProcessReading(24, "viewer", ("graphics",), GIB, 0.05, None, None),
    )
