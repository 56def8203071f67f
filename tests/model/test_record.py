"""Model values: slotted ``Record`` classes, none generated, read-only to mypy, equal by value."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import ClassVar

import msgspec
import pytest
from mypy import api as mypy_api

import falcon_gpu.model
from falcon_gpu.model.attribution import Attribution, ContainerRef, PodUsage
from falcon_gpu.model.cycle import HealthReport
from falcon_gpu.model.policy import PolicyStatus
from falcon_gpu.model.record import Record
from falcon_gpu.model.samples import Series
from falcon_gpu.model.snapshot import DeviceReading, EccCounts, NvlinkErrors, ProcessReading, Snapshot


def _model_classes() -> list[type]:
    out = []
    for info in pkgutil.iter_modules(falcon_gpu.model.__path__):
        module = importlib.import_module(f"falcon_gpu.model.{info.name}")
        out += [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__]
    return out


def test_every_model_class_is_a_slotted_record_and_no_dataclass() -> None:
    classes = [
        c
        for c in _model_classes()
        if c is not Record
        and c.__module__ != "falcon_gpu.model.record"
        and not issubclass(c, msgspec.Struct | dict)
    ]  # DeviceReading and its ReadingFields: built from the reading table (test_device_reading.py)
    assert len(classes) >= 25
    for cls in classes:
        assert issubclass(cls, Record) and not issubclass(cls, tuple), cls
        assert not hasattr(cls, "__dataclass_fields__"), cls
        assert cls._fields == cls.__slots__, cls
        if "__init__" in vars(cls):  # written by hand: the same fields, in order
            assert list(inspect.signature(cls).parameters) == list(cls._fields), cls


def test_the_generic_init_takes_values_by_position_keyword_or_default() -> None:
    assert PolicyStatus("hot", "GPU-1", True, 3) == PolicyStatus(
        violations_total=3, violating=True, gpu_uuid="GPU-1", policy="hot"
    )
    assert (
        Snapshot(1.0, True).devices == ()
        and Snapshot(1.0, True, devices=(), nvml_error="x").nvml_error == "x"
    )
    with pytest.raises(TypeError, match="missing the value of 'violations_total'"):
        PolicyStatus("hot", "GPU-1", True)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="takes 4 values, 5 given"):
        PolicyStatus("hot", "GPU-1", True, 3, 4)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected or repeated value 'misspelt'"):
        Snapshot(1.0, True, misspelt=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected or repeated value 'timestamp'"):
        Snapshot(1.0, True, timestamp=2.0)  # type: ignore[misc]


def test_a_mutable_default_or_a_required_field_after_a_default_is_refused_at_class_creation() -> None:
    with pytest.raises(ValueError, match=r"Bad\.seen: a mutable default"):

        class Bad(Record):
            seen: dict[str, int] = {}

    class Counted(Record):
        limit: ClassVar[int] = 3
        value: int

    assert Counted._fields == ("value",) and Counted.limit == 3 and Counted(5).value == 5

    with pytest.raises(TypeError, match=r"Late\.b: a field without a default after one with"):

        class Late(Record):
            a: int = 0
            b: int


def test_equal_values_are_equal_and_hash_alike() -> None:
    a = ProcessReading(7, "python", ("compute",), 1 << 30, 0.5)
    b = ProcessReading(7, "python", ("compute",), 1 << 30, 0.5)
    assert a == b and hash(a) == hash(b)
    assert a != a._replace(sm_util_ratio=0.25)
    assert {Series((("gpu", "0"),), 1.0), Series((("gpu", "0"),), 1.0)} == {Series((("gpu", "0"),), 1.0)}
    assert Series((), 1.0) != Series((), 2.0) and Series((), 1.0) != ((), 1.0)
    ref = ContainerRef("ml", "train", "main")
    assert PodUsage(ref, "GPU-1", processes=2) == PodUsage(ref, "GPU-1", processes=2)
    assert PodUsage(ref, "GPU-1", processes=2) != PodUsage(ref, "GPU-1", processes=3)


def test_a_hash_is_worked_out_once_and_a_changed_copy_has_its_own() -> None:
    a = ProcessReading(7, "python", ("compute",), 1 << 30, 0.5)
    first = hash(a)
    assert object.__getattribute__(a, "_hash") == first == hash(a)  # kept: the value never changes
    changed = a._replace(sm_util_ratio=0.25)
    assert hash(changed) == hash(ProcessReading(7, "python", ("compute",), 1 << 30, 0.25))
    assert {a: 1}[ProcessReading(7, "python", ("compute",), 1 << 30, 0.5)] == 1


def test_a_record_is_never_equal_to_another_class_with_the_same_values() -> None:
    class Other(Record):
        labels: tuple[tuple[str, str], ...]
        value: float

    assert Series((), 1.0) != Other((), 1.0) and hash(Series((), 1.0)) != hash(Other((), 1.0))
    assert Other((), 1.0) == Other((), 1.0) and Other((), 1.0) != ((), 1.0)
    assert NvlinkErrors(1, 2, 3, 4) != EccCounts(1, 2, 3, 4)


def test_replace_copies_and_leaves_the_original_alone() -> None:
    dev = DeviceReading(0, "GPU-1", "H100", "00:18.0", ecc=EccCounts(1, 0, 1, 0), xid_counts={79: 1})
    changed = dev._replace(up=False)
    assert (dev.up, changed.up, changed.ecc) == (True, False, EccCounts(1, 0, 1, 0))
    assert changed.xid_counts == {79: 1}
    assert changed == dev._replace(up=False) and changed != dev
    with pytest.raises(TypeError):
        dev._replace(misspelt=1)


def test_mutable_defaults_are_fresh_per_value() -> None:
    a, b = DeviceReading(0, "a", "x", "p"), DeviceReading(1, "b", "x", "p")
    assert a.xid_counts == {} and a.xid_counts is not b.xid_counts
    assert HealthReport({}).xid_in_interval is not HealthReport({}).xid_in_interval
    assert Attribution().sources_ok is not Attribution().sources_ok


def test_repr_names_the_class_and_every_field() -> None:
    assert repr(Series((("gpu", "0"),), 1.5)) == "Series(labels=(('gpu', '0'),), value=1.5)"
    assert repr(NvlinkErrors(1)) == "NvlinkErrors(crc_flit=1, crc_data=None, replay=None, recovery=None)"


def test_values_are_slotted() -> None:
    with pytest.raises(AttributeError):
        ProcessReading(1).misspelt = 2  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        Series((), 1.0).misspelt = 2  # type: ignore[attr-defined]
    assert not hasattr(DeviceReading(0, "a", "x", "p"), "__dict__")


def test_mypy_refuses_an_assignment_to_a_field(tmp_path: Path) -> None:
    """The immutability that ``@dataclass(frozen=True)`` checked at run time is checked here."""
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
    assert 'probe.py:4: error: Cannot assign to final attribute "pid"' in out
    assert 'probe.py:6: error: Cannot assign to final attribute "value"' in out
    assert 'probe.py:9: error: Property "up" defined in "DeviceReading" is read-only' in out
    assert 'probe.py:11: error: Property "nvml_ok" defined in "Snapshot" is read-only' in out
    assert 'probe.py:12: error: Argument 1 to "Snapshot" has incompatible type "str"; expected "float"' in out
    assert 'probe.py:13: error: Unexpected keyword argument "misspelt" for "Snapshot"' in out
    assert out.count("error:") == 6
