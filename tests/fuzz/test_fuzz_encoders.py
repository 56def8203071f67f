"""Hostile names through every schema and every sink encoder, checked with a reference decoder.

Pods, namespaces, containers, process commands and GPU model names are drawn from any Unicode
(lone surrogates, control characters, NUL, very long values, the characters each wire treats
specially). For each cycle, each Prometheus schema's output must:

* encode as UTF-8 and parse with prometheus_client's text parser (``/metrics``, stdout, the
  Pushgateway body) and its OpenMetrics parser (``/metrics`` negotiated), and the remote-write
  1.0 and 2.0 bodies must decode with the generated protobuf stubs;
* hold exactly the rendered series, each label value as the schema gave it with a lone surrogate
  replaced by U+FFFD (:mod:`falcon_gpu.model.text`), so distinct series stay distinct.

The Pushgateway grouping URL must decode back to each value; the Open-Falcon JSON must parse with
``json``, keep every tag value in ``[A-Za-z0-9._-]`` and under the length limit, and give two
distinct pods two distinct tag sets.
"""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from urllib.parse import unquote, urlsplit

import cramjam
from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from falcon_gpu.listen import openmetrics
from falcon_gpu.model.attribution import ContainerRef, PodUsage, ProcessUsage
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.jobs import JobGroup, JobRecord
from falcon_gpu.model.samples import Labels, PromBatch
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.model.text import utf8_text
from falcon_gpu.schemas import dcgm, falcon_gpu, falcon_gpu_jobs, nvidia_smi, openfalcon
from falcon_gpu.sinks.config import RemoteWriteSinkConfig
from falcon_gpu.sinks.encoding import falcon_json, prom_text
from falcon_gpu.sinks.pushgateway import grouping_url
from falcon_gpu.sinks.remote_write.proto import remote_v1_pb2, remote_v2_pb2
from falcon_gpu.sinks.remote_write.sink import RemoteWritePusher
from tests.delivery.conftest import FakeRendered
from tests.fuzz.strategies import FUZZ, NAMES
from tests.schemas.fixtures import cycle

SCHEMAS = {"falcon_gpu": falcon_gpu.render, "dcgm": dcgm.render, "nvidia_smi": nvidia_smi.render}
_TAG_VALUE = re.compile(r"[A-Za-z0-9._-]+")

Key = tuple[str, frozenset[tuple[str, str]]]


@st.composite
def hostile_cycles(draw: st.DrawFn) -> CycleData:
    """The fixture cycle with its pods, processes and GPU model renamed from :data:`NAMES`."""
    c = cycle(process_metrics=True)
    triples = draw(st.lists(st.tuples(NAMES, NAMES, NAMES), min_size=1, max_size=4, unique=True))
    base = c.attribution.pods[0]
    pods = tuple(
        PodUsage(ContainerRef(ns, pod, container), base.gpu_uuid, memory_used_bytes=i << 20, processes=1)
        for i, (ns, pod, container) in enumerate(triples, 1)
    )
    processes = tuple(
        ProcessUsage(100 + i, draw(NAMES), base.gpu_uuid, memory_used_bytes=1 << 20, container=p.container)
        for i, p in enumerate(pods)
    )
    devices = list(c.snapshot.devices)
    devices[0] = replace(devices[0], name=draw(NAMES))
    snapshot = replace(c.snapshot, devices=tuple(devices))
    attribution = replace(c.attribution, pods=pods, processes=processes)
    return replace(c, snapshot=snapshot, attribution=attribution)


def rendered_series(batch: PromBatch, *, extra: Labels = ()) -> Counter[Key]:
    """Every series of the batch as a decoder should see it: label values with lone surrogates replaced."""
    out: Counter[Key] = Counter()
    for family in batch.families:
        for s in family.series:
            labels = {k: utf8_text(v) for k, v in s.labels if v != ""}
            out[(family.name, frozenset({**labels, **dict(extra)}.items()))] += 1
    return out


def parsed_text(text: str, names: set[str]) -> Counter[Key]:
    """The parser's series; it appends ``_total`` to a counter sample lacking it (dcgm's names): undone."""
    out: Counter[Key] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if name not in names and name.endswith("_total") and name[: -len("_total")] in names:
                name = name[: -len("_total")]
            out[(name, frozenset(sample.labels.items()))] += 1
    return out


@FUZZ
@given(hostile_cycles(), st.sampled_from(sorted(SCHEMAS)))
def test_prometheus_text_parses_to_exactly_the_rendered_series(c: CycleData, schema: str) -> None:
    batch = SCHEMAS[schema](c)
    text = prom_text.encode(batch, prom_text.SeriesText())
    text.encode("utf-8")  # what /metrics, stdout and the Pushgateway send: must not raise
    assert parsed_text(text, {f.name for f in batch.families}) == rendered_series(batch)


@FUZZ
@given(hostile_cycles(), st.sampled_from(sorted(SCHEMAS)))
def test_openmetrics_parses_to_exactly_the_rendered_series(c: CycleData, schema: str) -> None:
    batch = SCHEMAS[schema](c)
    text = openmetrics.encode(batch)
    text.encode("utf-8")
    parsed = Counter(
        (sample.name, frozenset(sample.labels.items()))
        for family in openmetrics_families(text)
        for sample in family.samples
    )
    assert parsed == rendered_series(batch)


def remote_write_series(body: bytes) -> Counter[Key]:
    version, payload = body[0], bytes(cramjam.snappy.decompress_raw(body[1:]))
    out: Counter[Key] = Counter()
    if version == 1:
        for ts in remote_v1_pb2.WriteRequest.FromString(payload).timeseries:  # type: ignore[attr-defined]
            labels = {lab.name: lab.value for lab in ts.labels}
            out[(labels.pop("__name__"), frozenset(labels.items()))] += len(ts.samples)
        return out
    request = remote_v2_pb2.Request.FromString(payload)  # type: ignore[attr-defined]
    symbols = list(request.symbols)
    for ts in request.timeseries:
        refs = list(ts.labels_refs)
        labels = {symbols[refs[i]]: symbols[refs[i + 1]] for i in range(0, len(refs), 2)}
        out[(labels.pop("__name__"), frozenset(labels.items()))] += len(ts.samples)
    return out


@FUZZ
@given(hostile_cycles(), st.sampled_from(sorted(SCHEMAS)), st.sampled_from([1, 2]))
def test_remote_write_bodies_decode_to_exactly_the_rendered_series(
    c: CycleData, schema: str, version: int
) -> None:
    batch = SCHEMAS[schema](c)
    telemetry = Telemetry()
    config = RemoteWriteSinkConfig(
        type="remote_write", url="http://127.0.0.1:9/api/v1/write", version=version
    )
    pusher = RemoteWritePusher(config, telemetry=telemetry, node="fuzz-node")
    try:
        body = pusher.encode(pusher.explode(FakeRendered(batch)))
    finally:
        pusher.close()
    assert telemetry.view().samples_total.get(("remote_write", "dropped"), 0) == 0
    expected = rendered_series(batch, extra=(("job", "falcon_gpu"), ("instance", "fuzz-node")))
    assert remote_write_series(body) == expected


def grouping_values(url: str) -> list[tuple[str, str]]:
    """The Pushgateway's reading of a grouping path: ``name/value`` pairs, ``@base64`` decoded."""
    parts = urlsplit(url).path.split("/")[2:]
    assert len(parts) % 2 == 0 and all(p not in ("", ".", "..") for p in parts), parts
    out = []
    for name, value in zip(parts[::2], parts[1::2], strict=True):
        if name.endswith("@base64"):
            out.append((name[: -len("@base64")], base64.urlsafe_b64decode(value + "==").decode()))
        else:
            out.append((name, unquote(value, errors="strict")))
    return out


@FUZZ
@given(NAMES, NAMES)
def test_pushgateway_grouping_urls_decode_back_to_their_values(namespace: str, pod: str) -> None:
    grouping = (("job", "falcon_gpu_job"), ("namespace", namespace), ("pod", pod))
    url = grouping_url("http://127.0.0.1:9091", grouping)
    assert url.isascii()
    assert grouping_values(url) == [(k, utf8_text(v)) for k, v in grouping]


@FUZZ
@given(hostile_cycles())
def test_open_falcon_json_parses_keeps_tags_safe_and_pods_apart(c: CycleData) -> None:
    items = openfalcon.render(c)
    decoded = json.loads(falcon_json.text(items, cache=falcon_json.ItemText()))
    assert len(decoded) == len(items)
    for item in decoded:
        assert len(item["metric"]) + len(item["tags"]) <= openfalcon.MAX_COUNTER
        for pair in filter(None, item["tags"].split(",")):
            value = pair.partition("=")[2]
            assert _TAG_VALUE.fullmatch(value), pair
    pods = {(p.container.namespace, p.container.pod, p.container.container) for p in c.attribution.pods}
    tag_sets = {i["tags"] for i in decoded if i["metric"] == "PodFBUsed"}
    assert len(tag_sets) == len(pods)


@FUZZ
@given(st.lists(NAMES, min_size=2, max_size=6, unique=True), st.sampled_from(sorted(openfalcon.NAME_TAGS)))
def test_distinct_names_give_distinct_open_falcon_tags(names: list[str], key: str) -> None:
    tags = {openfalcon.format_tags("PodFBUsed", [("GpuId", "0"), (key, n)]) for n in names if n}
    assert len(tags) == len([n for n in names if n])


@FUZZ
@given(NAMES, NAMES, NAMES, NAMES)
def test_job_records_render_parse_and_group_under_any_names(
    ns: str, pod: str, container: str, model: str
) -> None:
    record = JobRecord(
        ns, pod, container, "node-a", 0, "GPU-aaaa", model, 1.0, 61.0, 12.5, 1 << 30, 1 << 29, 3
    )
    (group,) = falcon_gpu_jobs.render((JobGroup(ns, pod, (record,)),), 61.0)
    text = prom_text.encode(group.batch, prom_text.SeriesText())
    assert parsed_text(text, {f.name for f in group.batch.families}) == rendered_series(group.batch)
    url = grouping_url("http://127.0.0.1:9091", group.grouping)
    assert grouping_values(url) == [(k, utf8_text(v)) for k, v in group.grouping]
