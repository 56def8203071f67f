"""remote-write 1.0 body: a ``prometheus.WriteRequest``, snappy *block* compressed.

The message is written directly in protobuf wire format rather than through
the generated classes: the label part of a series is encoded once and cached
(label sets repeat every cycle), leaving one small sample encoding per value.
That is what makes encoding fast (see docs/BENCHMARKS.md); the tests check
that the generated :mod:`.proto.remote_v1_pb2` parses the output to the same
series. Samples of one series keep their input order (timestamps ascend).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import cramjam

from falcon_gpu.model.samples import Labels

CACHE_MAX = 200_000
_DOUBLE = struct.Struct("<d")

# (sorted label set incl. __name__, timestamp ms, value)
RwSample = tuple[Labels, int, float]


def varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    return bytes((tag,)) + varint(len(payload)) + payload


def _label_bytes(labels: Labels) -> bytes:
    return b"".join(_field(0x0A, _field(0x0A, k.encode()) + _field(0x12, v.encode())) for k, v in labels)


class V1Encoder:
    def __init__(self) -> None:
        self._labels: dict[Labels, bytes] = {}

    def _cached(self, labels: Labels) -> bytes:
        found = self._labels.get(labels)
        if found is None:
            if len(self._labels) >= CACHE_MAX:
                self._labels.clear()
            found = self._labels[labels] = _label_bytes(labels)
        return found

    def serialize(self, samples: Iterable[RwSample]) -> bytes:
        """The uncompressed WriteRequest; one TimeSeries per distinct label set."""
        grouped: dict[Labels, list[bytes]] = {}
        pack = _DOUBLE.pack
        for labels, ts, value in samples:
            sample = b"\x09" + pack(value) + b"\x10" + varint(ts)
            enc = b"\x12" + bytes((len(sample),)) + sample  # a sample is always < 128 bytes
            found = grouped.get(labels)
            if found is None:
                grouped[labels] = [enc]
            else:
                found.append(enc)
        parts = []
        for labels, encoded in grouped.items():
            body = self._cached(labels) + b"".join(encoded)
            parts.append(b"\x0a" + varint(len(body)) + body)
        return b"".join(parts)

    def encode(self, samples: Iterable[RwSample]) -> bytes:
        """The compressed request body."""
        return bytes(cramjam.snappy.compress_raw(self.serialize(samples)))
