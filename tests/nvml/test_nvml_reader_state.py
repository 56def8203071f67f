"""The readers' kept state (:class:`~falcon_gpu.sources.nvml.reader_state.ReaderState`) belongs to its
source and is bounded by the GPUs and MIG instances there are: two sources in one process keep their
own, and a GPU that goes (or an instance destroyed) leaves no entry behind."""

from __future__ import annotations

from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.sources.nvml.reader_state import ReaderState
from tests.nvml.helpers import GIB, gpu, scenario_of, source_on
from tests.nvml.test_nvml_mig_layout import _instance, _mig_a100

PER_SCOPE = ("health", "mps_gates", "graphics_levels", "process_lists", "kept_processes")
"""The attributes kept per GPU or MIG instance scope."""


def _scopes(state: ReaderState) -> dict[str, set[str]]:
    """Per attribute kept per scope: the scopes it holds an entry for (a GPU's instances included)."""
    held = {name: set(getattr(state, name)) for name in PER_SCOPE}
    held["instances"] = set(state.instances).union(*state.instances.values())
    return held


def test_every_slot_but_the_per_source_ones_is_kept_per_scope() -> None:
    """A new attribute must be named here (and dropped by ``forget``), or said to be per source."""
    assert set(ReaderState.__slots__) == {*PER_SCOPE, "instances", "memory_variants", "clock_reasons"}


def _busy(uuid: str, name: str, **extra: object) -> dict[str, object]:
    """A GPU running one process named ``name`` (its memory read, so every process-list gate keeps state)."""
    process = {"pid": 11, "name": name, "type": "compute", "used_memory_bytes": GIB, "sm_util_percent": 30}
    return gpu(uuid, memory_total_bytes=40 * GIB, memory_used_bytes=2 * GIB, processes=[process], **extra)


def test_a_lost_gpu_leaves_no_reader_state_behind_and_the_other_keeps_its_own() -> None:
    sim = SimulatedNvml(scenario_of(_busy("GPU-1", "a"), _busy("GPU-2", "b", lost_at_cycle=2)))
    source, _ = source_on(sim)
    source.collect(1000.0)
    source.collect(1001.0)
    held = _scopes(source._state)
    assert all(held[name] == {"GPU-1", "GPU-2"} for name in PER_SCOPE), held
    third = source.collect(1002.0)
    assert [d.up for d in third.devices] == [True, False]
    assert _scopes(source._state) == {**{name: {"GPU-1"} for name in PER_SCOPE}, "instances": set()}
    assert [p.name for p in source.collect(1003.0).devices[0].processes] == ["a"]


def test_a_destroyed_instance_s_state_goes_and_a_lost_mig_gpu_takes_its_instances_with_it() -> None:
    sim = _mig_a100(_instance(1, 2), _instance(2, 3, until_cycle=3), _instance(3, 4), lost_at_cycle=5)
    source, _ = source_on(sim)
    devices = [source.collect(1000.0 + c).devices[0] for c in range(3)]
    parent = devices[0].uuid
    held = _scopes(source._state)
    assert held["instances"] == {parent, "MIG-1", "MIG-2", "MIG-3"}
    assert held["process_lists"] == held["kept_processes"] == {parent, "MIG-1", "MIG-2", "MIG-3"}
    assert [m.uuid for m in source.collect(1003.0).devices[0].mig] == ["MIG-1", "MIG-3"]
    held = _scopes(source._state)
    assert "MIG-2" not in set().union(*held.values()), held
    assert held["process_lists"] == {parent, "MIG-1", "MIG-3"}
    source.collect(1004.0)
    assert not source.collect(1005.0).devices[0].up
    assert set().union(*_scopes(source._state).values()) == set()


def test_two_sources_in_one_process_keep_separate_state() -> None:
    """Two nodes' GPUs with the same UUID, the same process (PID, memory, share) and other names: each
    source hands out its own readings, cycle after cycle (a shared state would hand one source the
    other's kept tuple: the lists and shares read the same)."""
    one, _ = source_on(SimulatedNvml(scenario_of(_busy("GPU-x", "mine"))))
    two, _ = source_on(SimulatedNvml(scenario_of(_busy("GPU-x", "theirs"))))
    for t in range(4):
        assert [p.name for p in one.collect(1000.0 + t).devices[0].processes] == ["mine"]
        assert [p.name for p in two.collect(1000.0 + t).devices[0].processes] == ["theirs"]
    assert one._state is not two._state
    assert [p.name for p in one._state.process_lists["GPU-x"].readings] == ["mine"]
    assert [p.name for p in two._state.process_lists["GPU-x"].readings] == ["theirs"]


def test_devices_looked_up_again_keep_no_scope_and_the_per_source_state_stays() -> None:
    """The source forgets its devices (here: closed; also NVML gone, the device count changed): every
    per-scope entry goes with them; what is derived from the library alone is kept."""
    source, _ = source_on(SimulatedNvml(scenario_of(_busy("GPU-1", "a"), _busy("GPU-2", "b"))))
    source.collect(1000.0)
    assert set().union(*_scopes(source._state).values()) == {"GPU-1", "GPU-2"}
    source.close()
    assert set().union(*_scopes(source._state).values()) == set()
    assert source._state.memory_variants is not None
