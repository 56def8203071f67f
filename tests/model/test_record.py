"""Model values: frozen ``msgspec.Struct`` classes, read-only to mypy, equal by value.

``DeviceReading`` is built from the reading table (its own tests: ``test_device_reading.py``)."""

from __future__ import annotations

import gc
import importlib
import inspect
import pickle
import pkgutil
from pathlib import Path

import msgspec
import pytest
from msgspec.structs import replace
from mypy import api as mypy_api

import falcon_gpu.model
from falcon_gpu.model.attribution import Attribution, ContainerRef, PodUsage
from falcon_gpu.model.cycle import HealthReport
from falcon_gpu.model.policy import PolicyStatus
from falcon_gpu.model.samples import Series
from falcon_gpu.model.snapshot import DeviceReading, EccCounts, NvlinkErrors, ProcessReading, Snapshot
from falcon_gpu.model.telemetry import Telemetry


def _model_classes() -> list[type]:
    out = []
    for info in pkgutil.iter_modules(falcon_gpu.model.__path__):
        module = importlib.import_module(f"falcon_gpu.model.{info.name}")
        out += [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__]
    return out


def test_every_model_class_is_a_frozen_struct_untracked_by_the_gc_and_no_dataclass() -> None:
    classes = [
        c
        for c in _model_classes()
        if c is not Telemetry  # the counters the stages report into, not a value
        and c.__module__ != "falcon_gpu.model.jobs"  # jobs: dataclasses
        and not issubclass(c, dict)  # ReadingFields: the table's keys (test_device_reading.py)
    ]
    assert len(classes) >= 25
    for cls in classes:
        assert issubclass(cls, msgspec.Struct), cls
        assert not hasattr(cls, "__dataclass_fields__"), cls
        config = cls.__struct_config__
        assert config.frozen and not config.gc, cls  # values hold no cycles: nothing for the collector


def test_a_value_holding_tuples_is_not_tracked_by_the_collector() -> None:
    snapshot = Snapshot(1.0, True, devices=())
    assert not gc.is_tracked(snapshot) and not gc.is_tracked(Series((("gpu", "0"),), 1.0))


def test_values_are_built_by_position_keyword_or_default() -> None:
    assert PolicyStatus("hot", "GPU-1", True, 3) == PolicyStatus(
        violations_total=3, violating=True, gpu_uuid="GPU-1", policy="hot"
    )
    assert (
        Snapshot(1.0, True).devices == ()
        and Snapshot(1.0, True, devices=(), nvml_error="x").nvml_error == "x"
    )
    with pytest.raises(TypeError, match="Missing required argument 'violations_total'"):
        PolicyStatus("hot", "GPU-1", True)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="Extra positional arguments"):
        PolicyStatus("hot", "GPU-1", True, 3, 4)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="Unexpected keyword argument 'misspelt'"):
        Snapshot(1.0, True, misspelt=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'timestamp' given by name and position"):
        Snapshot(1.0, True, timestamp=2.0)  # type: ignore[misc]


def test_equal_values_are_equal_and_hash_alike() -> None:
    a = ProcessReading(7, "python", ("compute",), 1 << 30, 0.5)
    b = ProcessReading(7, "python", ("compute",), 1 << 30, 0.5)
    assert a == b and hash(a) == hash(b)
    assert a != replace(a, sm_util_ratio=0.25)
    assert {Series((("gpu", "0"),), 1.0), Series((("gpu", "0"),), 1.0)} == {Series((("gpu", "0"),), 1.0)}
    assert Series((), 1.0) != Series((), 2.0) and Series((), 1.0) != ((), 1.0)
    ref = ContainerRef("ml", "train", "main")
    assert PodUsage(ref, "GPU-1", processes=2) == PodUsage(ref, "GPU-1", processes=2)
    assert PodUsage(ref, "GPU-1", processes=2) != PodUsage(ref, "GPU-1", processes=3)
    nan = float("nan")  # the same NaN object: equal, as in a tuple (a reading left as NaN)
    assert Series((), nan) == Series((), nan)


def test_the_identity_that_keys_label_caches_keeps_its_hash() -> None:
    ref = ContainerRef("ml", "train", "main", labels=(("label_team", "nlp"),))
    assert ContainerRef.__struct_config__.cache_hash
    assert hash(ref) == hash(ContainerRef("ml", "train", "main", labels=(("label_team", "nlp"),)))
    assert {ref: 1}[replace(ref)] == 1 and hash(replace(ref, pod="other")) != hash(ref)


def test_a_value_is_never_equal_to_another_class_with_the_same_values() -> None:
    class Other(msgspec.Struct, frozen=True, gc=False):
        labels: tuple[tuple[str, str], ...]
        value: float

    assert Series((), 1.0) != Other((), 1.0)
    assert Other((), 1.0) == Other((), 1.0) and Other((), 1.0) != ((), 1.0)
    assert NvlinkErrors(1, 2, 3, 4) != EccCounts(1, 2, 3, 4)


def test_replace_copies_and_leaves_the_original_alone() -> None:
    snap = Snapshot(1.0, True, driver_version="560.1")
    changed = replace(snap, nvml_ok=False)
    assert (snap.nvml_ok, changed.nvml_ok, changed.driver_version) == (True, False, "560.1")
    assert changed == replace(snap, nvml_ok=False) and changed != snap
    with pytest.raises(TypeError):
        replace(snap, misspelt=1)


def test_device_reading_replace_copies_and_leaves_the_original_alone() -> None:
    dev = DeviceReading(0, "GPU-1", "H100", "00:18.0", ecc=EccCounts(1, 0, 1, 0), xid_counts={79: 1})
    changed = replace(dev, up=False)
    assert (dev.up, changed.up, changed.ecc) == (True, False, EccCounts(1, 0, 1, 0))
    assert changed.xid_counts == {79: 1}
    assert changed == replace(dev, up=False) and changed != dev
    with pytest.raises(TypeError):
        replace(dev, misspelt=1)


def test_mutable_defaults_are_fresh_per_value() -> None:
    a, b = DeviceReading(0, "a", "x", "p"), DeviceReading(1, "b", "x", "p")
    assert a.xid_counts == {} and a.xid_counts is not b.xid_counts
    assert HealthReport({}).xid_in_interval == {}
    assert HealthReport({}).xid_in_interval is not HealthReport({}).xid_in_interval
    assert Attribution().sources_ok is not Attribution().sources_ok


def test_repr_names_the_class_and_every_field() -> None:
    assert repr(Series((("gpu", "0"),), 1.5)) == "Series(labels=(('gpu', '0'),), value=1.5)"
    assert repr(NvlinkErrors(1)) == "NvlinkErrors(crc_flit=1, crc_data=None, replay=None, recovery=None)"


def test_values_are_slotted_and_read_only() -> None:
    with pytest.raises(AttributeError):
        ProcessReading(1).misspelt = 2  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        Series((), 1.0).value = 2.0  # type: ignore[misc]
    assert not hasattr(Series((), 1.0), "__dict__")
    assert not hasattr(DeviceReading(0, "a", "x", "p"), "__dict__")


def test_a_value_survives_pickling() -> None:
    """What crosses a process boundary (none does today) comes back equal."""
    ref = ContainerRef("ml", "train", "main", labels=(("label_team", "nlp"),))
    usage = PodUsage(ref, "GPU-1", processes=2)
    assert pickle.loads(pickle.dumps(usage)) == usage


def test_mypy_refuses_an_assignment_to_a_field(tmp_path: Path) -> None:
    """The immutability that ``@dataclass(frozen=True)`` checked at run time is checked here too."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from falcon_gpu.model.snapshot import DeviceReading, ProcessReading, Snapshot\n"
        "from falcon_gpu.model.samples import Series\n"
        "p = ProcessReading(1)\n"
        "p.pid = 2\n"
        "s = Series((), 1.0)\n"
        "s.value = 3.0\n"
        "ok = ProcessReading(2, name='x').name\n"
        "d = DeviceReading(0, 'GPU-1', 'H100', '00:18.0')\n"
        "d.up = False\n"
        "n = Snapshot(1.0, True)\n"
        "n.nvml_ok = False\n"
        "m = Snapshot('now', True)\n"
        "k = Snapshot(1.0, True, misspelt=1)\n"
    )
    out, _, status = mypy_api.run(["--strict", "--no-incremental", "--follow-imports=silent", str(probe)])
    assert status == 1
    assert 'probe.py:4: error: Property "pid" defined in "ProcessReading" is read-only' in out
    assert 'probe.py:6: error: Property "value" defined in "Series" is read-only' in out
    assert 'probe.py:9: error: Property "up" defined in "DeviceReading" is read-only' in out
    assert 'probe.py:11: error: Property "nvml_ok" defined in "Snapshot" is read-only' in out
    assert 'probe.py:12: error: Argument 1 to "Snapshot" has incompatible type "str"; expected "float"' in out
    assert 'probe.py:13: error: Unexpected keyword argument "misspelt" for "Snapshot"' in out
    assert out.count("error:") == 6
