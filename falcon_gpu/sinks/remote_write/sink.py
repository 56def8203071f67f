"""The Prometheus remote-write sink (Prometheus, VictoriaMetrics, Mimir, Thanos...).

:class:`RemoteWritePusher` only explodes a cycle into validated samples, encodes
a batch (1.0 or 2.0) and classifies the answer; queueing, batching, retry, the
spool and counting are :class:`~falcon_gpu.delivery.queued.QueuedDelivery`'s,
composed with it in :func:`build`.

Version 2 (``version = 2``) is tried first; when the receiver answers 415, or
a 2xx without ``X-Prometheus-Remote-Write-Samples-Written`` (a 1.0 receiver
that parsed the body as an empty 1.0 request and stored nothing), the sink
switches to 1.0 for good, says so once, and re-sends that batch as 1.0.

Staleness (CONTRACT section 3): a series sent in the previous cycle and not in
this one (a GPU lost, a pod or process gone, a label set changed) gets a
Prometheus staleness marker (:data:`STALE_NAN`) at this cycle's timestamp, and
every series still live gets one at a clean shutdown (the pusher's ``closing``
items; unless ``stale_on_shutdown = false``), so a query stops seeing
it at once instead of for the 5-minute lookback. Markers are ordinary samples
of the cycle's items: they go through the same queue, batches and spool as the
data, so they always follow the data they close, also across an outage or a
restart. After a SIGKILL the new process does not know the old one's series:
those end by the store's lookback instead.

Every series carries ``job`` and ``instance`` (settings; the node by default),
see :mod:`.labels`.

Spool body: one version byte (1 or 2) + the compressed request.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Sequence

from falcon_gpu import __version__
from falcon_gpu.delivery.http import HttpTransport, classify
from falcon_gpu.delivery.outcome import Ack, PermanentError
from falcon_gpu.delivery.queued import QueuedDelivery
from falcon_gpu.delivery.secrets import redact_url
from falcon_gpu.model.samples import Labels, MetricKind
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks.base import Rendered
from falcon_gpu.sinks.config import RemoteWriteSinkConfig
from falcon_gpu.sinks.context import SinkContext
from falcon_gpu.sinks.remote_write import encode_v2
from falcon_gpu.sinks.remote_write.encode_v1 import RwSample, V1Encoder
from falcon_gpu.sinks.remote_write.labels import LabelCache, Refused

log = logging.getLogger("falcon_gpu.sinks")

HEADERS_V1 = {
    "Content-Type": "application/x-protobuf",
    "Content-Encoding": "snappy",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
    "User-Agent": f"falcon-gpu/{__version__}",
}
HEADERS_V2 = {
    **HEADERS_V1,
    "Content-Type": encode_v2.CONTENT_TYPE,
    "X-Prometheus-Remote-Write-Version": "2.0.0",
}
WRITTEN_HEADER = "X-Prometheus-Remote-Write-Samples-Written"
STALE_NAN: float = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]
"""Prometheus's staleness marker: a NaN with this exact bit pattern (``value.StaleNaN``)."""


class RemoteWritePusher:
    """Implements :class:`~falcon_gpu.delivery.pusher.BatchPusher` for remote write."""

    def __init__(self, config: RemoteWriteSinkConfig, *, telemetry: Telemetry, node: str = "") -> None:
        self.name = config.name
        self._telemetry = telemetry
        self._key = f"delivery:{self.name}"
        self._url = config.url
        self._version = config.version
        self._labels = LabelCache(job=config.job, instance=config.instance or node)
        self._live: set[Labels] = set()  # series sent in the last cycle
        self._stale_on_shutdown = config.stale_on_shutdown
        self._last_ts = 0
        self._v1 = V1Encoder()
        self._metadata: dict[str, tuple[MetricKind, str]] = {}
        self._transport = HttpTransport(config, sink=self.name)

    def explode(self, rendered: Rendered) -> Sequence[RwSample]:
        batch = rendered.prometheus
        ts = batch.timestamp_ms
        out: list[RwSample] = []
        live: set[Labels] = set()
        invalid = 0
        for family in batch.families:
            if self._version == 2:
                self._metadata[family.name] = (family.kind, family.help)
            for s in family.series:
                labels = self._labels.lookup(family.name, s.labels)
                if isinstance(labels, Refused):
                    invalid += 1
                    self._telemetry.failing(
                        f"{self._key}:invalid:{family.name}",
                        "invalid_series",
                        f"sink {self.name}: not sending an invalid series: {labels}",
                    )
                    continue
                out.append((labels, ts, s.value))
                live.add(labels)
        if invalid:
            self._telemetry.samples(self.name, "dropped", invalid)
        out.extend((labels, ts, STALE_NAN) for labels in self._live - live)
        self._live, self._last_ts = live, ts
        return out

    def closing(self) -> Sequence[RwSample]:
        """A staleness marker for every live series (a clean shutdown), after the last cycle."""
        if not self._live or not self._stale_on_shutdown:
            return ()
        ts = max(int(time.time() * 1000), self._last_ts + 1)
        live, self._live = self._live, set()
        return [(labels, ts, STALE_NAN) for labels in live]

    def encode(self, items: Sequence[RwSample]) -> bytes:
        if self._version == 2:
            return b"\x02" + encode_v2.encode(items, self._metadata)
        return b"\x01" + self._v1.encode(items)

    def push(self, body: bytes, samples: int) -> Ack:
        version, payload = body[0], body[1:]
        if version == 2 and self._version == 1:
            payload, version = self._as_v1(payload), 1
        if version == 1:
            classify(self._transport.request("POST", self._url, payload, HEADERS_V1), self._url)
            return Ack()
        response = self._transport.request("POST", self._url, payload, HEADERS_V2)
        ok = 200 <= response.status_code < 300
        if response.status_code == 415 or (ok and WRITTEN_HEADER not in response.headers):
            self._version = 1
            log.warning(
                "sink %s: %s does not accept remote-write 2.0 (HTTP %d%s); using 1.0 from now on",
                self.name,
                redact_url(self._url),
                response.status_code,
                "" if response.status_code == 415 else f" without {WRITTEN_HEADER}",
            )
            return self.push(body, samples)
        classify(response, self._url)
        return Ack()

    def _as_v1(self, payload: bytes) -> bytes:
        try:
            return encode_v2.to_v1(payload, self._v1)
        except ValueError as exc:
            raise PermanentError(f"spooled batch cannot be converted to remote-write 1.0: {exc}") from None

    def check(self) -> tuple[bool, str]:
        """For ``doctor``: POST an empty 1.0 WriteRequest (a receiver stores nothing; Prometheus: 204)."""
        return self._transport.probe("POST", self._url, V1Encoder().encode([]), HEADERS_V1)

    def close(self) -> None:
        self._transport.close()


def build(config: RemoteWriteSinkConfig, ctx: SinkContext) -> QueuedDelivery[Rendered, RwSample]:
    return ctx.queued(config, RemoteWritePusher(config, telemetry=ctx.telemetry, node=ctx.node))
