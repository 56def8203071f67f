"""Grouping-key values the Pushgateway URL path cannot hold as they are, against the real Pushgateway.

Job records go to ``job=falcon_gpu_job/namespace/<ns>/pod/<pod>``: a pod named ``.`` or ``..`` made
a path the Pushgateway's router cleans (and then answers 400), so the records were dropped. Such
values (and empty ones, and ones with ``/``) go base64url-encoded under ``<name>@base64``, as the
Pushgateway README documents; each must arrive as its own group with its own value."""

from __future__ import annotations

import json
import logging
import time

import pytest

from falcon_gpu.model.samples import Family, PromBatch, PromGroup, Series
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.sinks.pushgateway import path_segment
from tests.delivery.conftest import FakeRendered, ManagedServer, http_get, prom_cycle
from tests.delivery.test_pushgateway import sink_for

PODS = (".", "..", "...", "a/b", "/", "%2e", "%2e%2e", "x y", "ä.ö", "a\\b", "?#", "\ufffd")


def record(pod: str) -> PromGroup:
    family = Family("falcon_gpu_job_record_energy_joules", "gauge", "energy",
                    (Series((("container", "main"),), 7.0),))  # fmt: skip
    grouping = (("job", "falcon_gpu_job"), ("namespace", "ml"), ("pod", pod))
    return PromGroup(grouping, PromBatch(int(time.time() * 1000), (family,)))


def test_dot_segments_empty_values_and_slashes_are_base64() -> None:
    assert path_segment("pod", ".") == "pod@base64/Lg=="
    assert path_segment("pod", "..") == "pod@base64/Li4="
    assert path_segment("pod", "") == "pod@base64/="
    assert path_segment("pod", "a/b") == "pod@base64/YS9i"
    assert path_segment("pod", "...") == "pod/..."  # not a dot segment: a plain name
    assert path_segment("pod", "a b") == "pod/a%20b"


@pytest.mark.servers
def test_every_odd_pod_name_arrives_as_its_own_group(
    pushgateway: ManagedServer, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    sink = sink_for(pushgateway.url, telemetry)
    groups = tuple(record(p) for p in PODS)
    with caplog.at_level(logging.WARNING, logger="falcon_gpu.sinks"):
        sink.submit(FakeRendered(prom_cycle(int(time.time() * 1000), 0.5).prometheus, job_groups=groups))
        assert sink.flush(10)
        sink.close(5)
    assert not [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    stored = json.loads(http_get(pushgateway.url + "/api/v1/metrics"))["data"]
    pods = sorted(g["labels"]["pod"] for g in stored if g["labels"].get("job") == "falcon_gpu_job")
    assert pods == sorted(PODS)
    lines = [x for x in http_get(pushgateway.url + "/metrics").decode().splitlines()
             if x.startswith("falcon_gpu_job_record_energy_joules{")]  # fmt: skip
    assert len(lines) == len(PODS)
