"""remote-write 2.0 body: an ``io.prometheus.write.v2.Request`` with its symbols table,
snappy block compressed; and the conversion back to 1.0 used when a receiver
turns out not to speak 2.0 (the batch is already in the spool as 2.0).

Every string (label names and values, help texts) is stored once in
``symbols`` (``symbols[0]`` is ``""``) and referenced by index; each series
carries its metric type and help as metadata, which 1.0 cannot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import cramjam

from falcon_gpu.model.samples import Labels, MetricKind
from falcon_gpu.sinks.remote_write.encode_v1 import RwSample, V1Encoder
from falcon_gpu.sinks.remote_write.proto import remote_v2_pb2

pb: Any = remote_v2_pb2  # generated code carries no type information

CONTENT_TYPE = "application/x-protobuf;proto=io.prometheus.write.v2.Request"
_TYPES = {"counter": pb.Metadata.METRIC_TYPE_COUNTER, "gauge": pb.Metadata.METRIC_TYPE_GAUGE}


def encode(samples: Iterable[RwSample], metadata: Mapping[str, tuple[MetricKind, str]]) -> bytes:
    """The compressed request; ``metadata`` maps a metric name to its (kind, help)."""
    symbols: dict[str, int] = {"": 0}

    def ref(text: str) -> int:
        found = symbols.get(text)
        if found is None:
            found = symbols[text] = len(symbols)
        return found

    request = pb.Request()
    series: dict[Labels, Any] = {}
    for labels, ts, value in samples:
        out = series.get(labels)
        if out is None:
            out = series[labels] = request.timeseries.add()
            for name, val in labels:
                out.labels_refs.extend((ref(name), ref(val)))
            kind, help_text = metadata.get(labels[_name_index(labels)][1], ("gauge", ""))
            out.metadata.type = _TYPES.get(kind, pb.Metadata.METRIC_TYPE_UNSPECIFIED)
            out.metadata.help_ref = ref(help_text)
        sample = out.samples.add()
        sample.value = value
        sample.timestamp = ts
    request.symbols.extend(symbols)  # dicts keep insertion order: index == ref
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))


def _name_index(labels: Labels) -> int:
    for i, (name, _) in enumerate(labels):
        if name == "__name__":
            return i
    raise ValueError("series without __name__")


def decode(body: bytes) -> list[RwSample]:
    """The samples of a compressed 2.0 request. Raises ValueError for a damaged body."""
    try:
        request = pb.Request.FromString(bytes(cramjam.snappy.decompress_raw(body)))
    except Exception as exc:
        raise ValueError(f"not a remote-write 2.0 body: {exc}") from None
    sym = list(request.symbols)
    out: list[RwSample] = []
    for ts in request.timeseries:
        refs = list(ts.labels_refs)
        labels = tuple((sym[refs[i]], sym[refs[i + 1]]) for i in range(0, len(refs), 2))
        out.extend((labels, s.timestamp, s.value) for s in ts.samples)
    return out


def to_v1(body: bytes, encoder: V1Encoder) -> bytes:
    """A compressed 2.0 body re-encoded as 1.0 (metadata is lost). Raises ValueError."""
    return encoder.encode(decode(body))
