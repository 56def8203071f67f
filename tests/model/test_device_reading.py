"""``DeviceReading`` from the reading table (issue 23 item 1): its stub is what the table makes of it, and
a table row is a field with its type and default."""

from __future__ import annotations

from pathlib import Path

import msgspec

from falcon_gpu.model import device_reading
from falcon_gpu.model.snapshot import DeviceReading
from falcon_gpu.readings.device import READINGS


def test_the_stub_mypy_reads_is_the_one_the_table_makes() -> None:
    stub = Path(device_reading.__file__).with_suffix(".pyi")
    assert stub.read_text() == device_reading.stub(), "run: python scripts/gen_device_reading_stub.py"


def test_every_table_row_is_a_field_of_its_type_defaulting_to_none() -> None:
    fields = {f.name: f for f in msgspec.structs.fields(DeviceReading)}
    for r in READINGS:
        assert fields[r.field].default is None and fields[r.field].type == r.type | None, r.field
    assert DeviceReading.__struct_fields__ == tuple(fields)
    assert DeviceReading.__struct_config__.frozen and not DeviceReading.__struct_config__.gc
    blank = DeviceReading(0, "GPU-a", "A100", "0:1")
    assert all(getattr(blank, r.field) is None for r in READINGS)
    assert blank.xid_counts == {} and blank.xid_counts is not DeviceReading(1, "b", "c", "d").xid_counts
