#!/usr/bin/env python3
"""Write ``falcon_gpu/model/device_reading.pyi`` (what mypy reads for ``DeviceReading``) from the reading
table. Run it after adding a reading to ``falcon_gpu/readings/device.py``; tests/model/test_device_reading.py
fails while the stub is stale.

Usage: python scripts/gen_device_reading_stub.py
"""

from __future__ import annotations

from pathlib import Path

from falcon_gpu.model import device_reading

STUB = Path(device_reading.__file__).with_suffix(".pyi")


def main() -> None:
    STUB.write_text(device_reading.stub())
    print(f"wrote {STUB}")


if __name__ == "__main__":
    main()
