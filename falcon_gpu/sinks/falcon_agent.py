"""Open-Falcon agent ``/v1/push`` and Nightingale ``/openfalcon/push``: POST a JSON array.

falcon-agent answers the text ``success``; Nightingale answers JSON with
``succ``/``fail`` counts (at the top level in current versions, under ``dat``
in older ones): the ``fail`` items are counted as dropped, not retried (the
server judged them invalid). This module only encodes and pushes
(:class:`FalconAgentPusher`); queueing, retry, the spool and counting are
:class:`~falcon_gpu.delivery.queued.QueuedDelivery`'s, composed in :func:`build`.
"""

from __future__ import annotations

import json
from typing import Any

from falcon_gpu.delivery.http import HttpTransport, answer_text, classify
from falcon_gpu.delivery.outcome import Ack, PermanentError, truncate
from falcon_gpu.delivery.queued import QueuedDelivery
from falcon_gpu.model.samples import FalconItem
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks.base import Rendered
from falcon_gpu.sinks.config import FalconAgentSinkConfig
from falcon_gpu.sinks.context import SinkContext
from falcon_gpu.sinks.encoding import falcon_json

HEADERS = {"Content-Type": "application/json"}


def parse_answer(text: str) -> Ack:
    """The answer of falcon-agent or Nightingale as an Ack. Raises PermanentError for
    an answer that reports an error for the whole request."""
    body = text.strip()
    if body == "success" or not body:
        return Ack()
    try:
        answer: Any = json.loads(body)
    except ValueError:
        raise PermanentError(f"unexpected answer: {truncate(body)}") from None
    if isinstance(answer, dict):
        if answer.get("err"):
            raise PermanentError(f"server error: {truncate(str(answer['err']))}")
        dat = answer.get("dat")
        fail = (dat if isinstance(dat, dict) else answer).get("fail", 0)
        if isinstance(fail, int) and fail >= 0:
            return Ack(rejected=fail)
    return Ack()


class FalconAgentPusher(falcon_json.FalconJsonBatches):
    """Implements :class:`~falcon_gpu.delivery.pusher.BatchPusher`: a JSON array per batch."""

    def __init__(self, config: FalconAgentSinkConfig, *, telemetry: Telemetry) -> None:
        super().__init__(config.name, telemetry)
        self._url = config.url
        self._transport = HttpTransport(config, sink=self.name)

    def push(self, body: bytes, samples: int) -> Ack:
        response = self._transport.request("POST", self._url, body, HEADERS)
        classify(response, self._url)
        ack = parse_answer(answer_text(response))  # its text may go into a log line
        return Ack(rejected=min(ack.rejected, samples))

    def check(self) -> tuple[bool, str]:
        """For ``doctor``: POST an empty array (falcon-agent and Nightingale store nothing for it)."""
        return self._transport.probe("POST", self._url, b"[]", HEADERS)

    def close(self) -> None:
        self._transport.close()


def build(config: FalconAgentSinkConfig, ctx: SinkContext) -> QueuedDelivery[Rendered, FalconItem]:
    return ctx.queued(config, FalconAgentPusher(config, telemetry=ctx.telemetry))
