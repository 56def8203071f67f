"""The Prometheus remote-write sink (Prometheus, VictoriaMetrics, Mimir, Thanos...).

It only explodes a cycle into validated samples, encodes a batch (1.0 or 2.0)
and classifies the answer; queueing, batching, retry and the spool are
:class:`~falcon_gpu.delivery.queued.QueuedSink`'s.

Version 2 (``version = 2``) is tried first; when the receiver answers 415, or
a 2xx without ``X-Prometheus-Remote-Write-Samples-Written`` (a 1.0 receiver
that parsed the body as an empty 1.0 request and stored nothing), the sink
switches to 1.0 for good, says so once, and re-sends that batch as 1.0.

Spool body: one version byte (1 or 2) + the compressed request.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from falcon_gpu import __version__
from falcon_gpu.delivery.http import HttpTransport, classify
from falcon_gpu.delivery.outcome import Ack, PermanentError
from falcon_gpu.delivery.queued import QueuedSink
from falcon_gpu.delivery.secrets import redact_url
from falcon_gpu.model.samples import MetricKind
from falcon_gpu.sinks.base import Rendered
from falcon_gpu.sinks.config import RemoteWriteSinkConfig
from falcon_gpu.sinks.remote_write import encode_v2
from falcon_gpu.sinks.remote_write.encode_v1 import RwSample, V1Encoder
from falcon_gpu.sinks.remote_write.labels import InvalidSeries, LabelCache
from falcon_gpu.telemetry import Telemetry

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


class RemoteWriteSink(QueuedSink[RwSample]):
    consumes = "prometheus"

    def __init__(
        self,
        config: RemoteWriteSinkConfig,
        *,
        spool_dir: Path | str,
        spool_max_bytes: int,
        telemetry: Telemetry,
    ) -> None:
        super().__init__(config, spool_dir=spool_dir, spool_max_bytes=spool_max_bytes, telemetry=telemetry)
        self._url = config.url
        self._version = config.version
        self._labels = LabelCache()
        self._v1 = V1Encoder()
        self._metadata: dict[str, tuple[MetricKind, str]] = {}
        self._transport = HttpTransport(config, sink=self.name)

    def explode(self, rendered: Rendered) -> Sequence[RwSample]:
        batch = rendered.prometheus
        ts = batch.timestamp_ms
        out: list[RwSample] = []
        invalid = 0
        for family in batch.families:
            if self._version == 2:
                self._metadata[family.name] = (family.kind, family.help)
            for s in family.series:
                try:
                    out.append((self._labels.series(family.name, s.labels), ts, s.value))
                except InvalidSeries as exc:
                    invalid += 1
                    self._telemetry.failing(
                        f"{self._key}:invalid:{family.name}",
                        "invalid_series",
                        f"sink {self.name}: not sending an invalid series: {exc}",
                    )
        if invalid:
            self._telemetry.samples(self.name, "dropped", invalid)
        return out

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

    def close_transport(self) -> None:
        self._transport.close()
