"""Prometheus Pushgateway: PUT the newest cycle to ``/metrics/job/<job>/node/<node>``.

Latest-state semantics (:class:`~falcon_gpu.delivery.latest.LatestDelivery`,
composed with :class:`PushgatewayPusher` in :func:`build`): PUT
replaces the whole group, so series of pods that ended disappear; after an
outage only the newest state is sent. The body is the text format without
timestamps (Pushgateway refuses pushed timestamps), optionally gzip'd. A
grouping value that the URL path cannot hold as it is (empty, containing ``/``,
or ``.`` / ``..``, which the Pushgateway's router cleans out of the path and then
answers 400) goes in the URL as ``<name>@base64/<base64url>``, as the
Pushgateway documents; any other value is percent-encoded. With
``delete_on_shutdown`` a clean shutdown deletes the group.

Job records (CONTRACT section 8) go to a group of their own per pod,
``job=falcon_gpu_job/namespace/<ns>/pod/<pod>``, PUT whole (the cycle carries
every latest record of the pod). Unlike the node's state, a record must not be
lost to a newer cycle: groups wait in ``_groups`` (the newest version of each
pod's group) until a push delivered them, and every push of the node's state
sends what waits after it, with the same retry. They stay at shutdown: they
are results, not state.
"""

from __future__ import annotations

import base64
import gzip
import logging
import threading
from urllib.parse import quote

from falcon_gpu.delivery.http import HttpTransport, classify
from falcon_gpu.delivery.latest import LatestDelivery
from falcon_gpu.delivery.outcome import Ack, DeliveryError, PermanentError
from falcon_gpu.delivery.secrets import redact_url
from falcon_gpu.model.samples import Labels, PromBatch, PromGroup
from falcon_gpu.model.text import utf8_text
from falcon_gpu.sinks.base import Rendered
from falcon_gpu.sinks.config import PushgatewaySinkConfig
from falcon_gpu.sinks.context import SinkContext
from falcon_gpu.sinks.encoding import prom_text

log = logging.getLogger("falcon_gpu.sinks")


_DOT_SEGMENTS = frozenset({".", ".."})


def path_segment(name: str, value: str) -> str:
    """``name/value`` for the grouping-key path, base64url-encoded where a value needs it."""
    if value == "":
        return f"{name}@base64/="  # the Pushgateway wants at least the padding for an empty value
    value = utf8_text(value)
    if "/" in value or value in _DOT_SEGMENTS:
        return f"{name}@base64/{base64.urlsafe_b64encode(value.encode()).decode()}"
    return f"{name}/{quote(value, safe='')}"


def group_url(base: str, job: str, node: str) -> str:
    return grouping_url(base, (("job", job), ("node", node)))


def grouping_url(base: str, grouping: Labels) -> str:
    return f"{base.rstrip('/')}/metrics/" + "/".join(path_segment(k, v) for k, v in grouping)


class PushgatewayPusher:
    """Implements :class:`~falcon_gpu.delivery.pusher.StatePusher`: the cycle is the state."""

    def __init__(self, config: PushgatewaySinkConfig, *, node: str) -> None:
        self.name = config.name
        self._base = config.url.rstrip("/")
        self._url = group_url(self._base, config.job, node)
        self._gzip = config.gzip
        self._delete = config.delete_on_shutdown
        self._transport = HttpTransport(config, sink=self.name)
        self._groups: dict[Labels, PromGroup] = {}
        self._groups_lock = threading.Lock()
        self._text = prom_text.SeriesText()
        """The cycle's text kept across pushes (pushed by the delivery's one thread); job groups,
        each pushed once, are encoded without it."""

    def state(self, rendered: Rendered) -> tuple[PromBatch, int]:
        batch = rendered.prometheus
        if rendered.job_groups:
            with self._groups_lock:
                self._groups.update((g.grouping, g) for g in rendered.job_groups)
        return batch, batch.sample_count()

    def push(self, state: PromBatch) -> Ack:
        self._put(self._url, state, self._text)
        with self._groups_lock:
            waiting = list(self._groups.values())
        for g in waiting:
            url = grouping_url(self._base, g.grouping)
            try:
                self._put(url, g.batch)
            except PermanentError as exc:  # refused for good: retrying would block every later record
                log.warning("sink %s: the Pushgateway refused job records %s, dropped: %s",
                            self.name, redact_url(url), exc)  # fmt: skip
            with self._groups_lock:
                if self._groups.get(g.grouping) is g:  # a newer version that arrived meanwhile stays
                    del self._groups[g.grouping]
        return Ack()

    def _put(self, url: str, batch: PromBatch, text: prom_text.SeriesText | None = None) -> None:
        body = prom_text.encode(batch, text).encode()
        headers = {"Content-Type": prom_text.CONTENT_TYPE}
        if self._gzip:
            body = gzip.compress(body, compresslevel=5)
            headers["Content-Encoding"] = "gzip"
        classify(self._transport.request("PUT", url, body, headers), url)

    def check(self) -> tuple[bool, str]:
        """For ``doctor``: GET ``/api/v1/status`` under ``url`` with the sink's auth (changes nothing;
        a ``url`` that already holds ``/metrics/job/...`` fails here, as its pushes would)."""
        return self._transport.probe("GET", f"{self._base}/api/v1/status")

    def close(self, timeout: float) -> None:
        try:
            if self._delete:
                classify(self._transport.request("DELETE", self._url), self._url)
                log.info("sink %s: deleted group %s", self.name, redact_url(self._url))
        except DeliveryError as exc:
            log.warning("sink %s: could not delete the group at shutdown: %s", self.name, exc)
        finally:
            self._transport.close()


def build(config: PushgatewaySinkConfig, ctx: SinkContext) -> LatestDelivery[Rendered, PromBatch]:
    return LatestDelivery(config, PushgatewayPusher(config, node=ctx.node), telemetry=ctx.telemetry)
