"""``@record`` model values: read-only to mypy, equal and hashable as frozen dataclasses, slotted."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from mypy import api as mypy_api

from falcon_gpu.model.samples import Series
from falcon_gpu.model.snapshot import DeviceReading, EccCounts, ProcessReading


def test_equal_values_are_equal_and_hash_alike() -> None:
    a = ProcessReading(7, "python", ("compute",), 1 << 30, 0.5)
    b = ProcessReading(7, "python", ("compute",), 1 << 30, 0.5)
    assert a == b and hash(a) == hash(b)
    assert a != dataclasses.replace(a, sm_util_ratio=0.25)
    assert {Series((("gpu", "0"),), 1.0), Series((("gpu", "0"),), 1.0)} == {Series((("gpu", "0"),), 1.0)}


def test_replace_copies_and_leaves_the_original_alone() -> None:
    dev = DeviceReading(0, "GPU-1", "H100", "00:18.0", ecc=EccCounts(1, 0, 1, 0))
    changed = dataclasses.replace(dev, up=False)
    assert (dev.up, changed.up, changed.ecc) == (True, False, EccCounts(1, 0, 1, 0))


def test_values_are_slotted() -> None:
    with pytest.raises(AttributeError):
        ProcessReading(1).misspelt = 2  # type: ignore[attr-defined]


def test_mypy_refuses_an_assignment_to_a_field(tmp_path: Path) -> None:
    """The immutability that ``@dataclass(frozen=True)`` checked at run time is checked here."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from falcon_gpu.model.snapshot import ProcessReading\n"
        "from falcon_gpu.model.samples import Series\n"
        "p = ProcessReading(1)\n"
        "p.pid = 2\n"
        "s = Series((), 1.0)\n"
        "s.value = 3.0\n"
        "ok = ProcessReading(2, name='x').name\n"
    )
    out, _, status = mypy_api.run(["--strict", "--no-incremental", "--follow-imports=silent", str(probe)])
    assert status == 1
    assert 'probe.py:4: error: Property "pid" defined in "ProcessReading" is read-only' in out
    assert 'probe.py:6: error: Property "value" defined in "Series" is read-only' in out
    assert out.count("error:") == 2
