"""Pods whose names sanitise to the same Open-Falcon tag value stay distinct, through the schema and
the falcon_transfer sink to the Go net/rpc transfer peer: ``a b``, ``a,b`` and ``a_b`` used to be
one counter (``pod=a_b``) three times over. A name sanitising changed gets ``-`` and a short hash of
the original; a name it did not change is sent as it is."""

from __future__ import annotations

from pathlib import Path

from msgspec.structs import replace

from falcon_gpu.model.attribution import PodUsage
from falcon_gpu.model.samples import FalconItem, PromBatch
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.schemas import openfalcon
from tests.delivery.conftest import FakeRendered, TransferServer
from tests.delivery.test_falcon import transfer_sink
from tests.schemas.fixtures import TRAIN, cycle

NAMES = ("a b", "a,b", "a_b", "a=b", "a\u00e9b", "a\ufffdb")


def items_for_pods() -> tuple[FalconItem, ...]:
    c = cycle()
    base = c.attribution.pods[0]
    pods = tuple(
        PodUsage(replace(TRAIN, pod=name), base.gpu_uuid, memory_used_bytes=i << 30, processes=1)
        for i, name in enumerate(NAMES, 1)
    )
    return openfalcon.render(replace(c, attribution=replace(c.attribution, pods=pods)))


def test_pods_that_sanitise_alike_reach_transfer_as_distinct_tag_sets(
    transfer: TransferServer, tmp_path: Path, telemetry: Telemetry
) -> None:
    items = items_for_pods()
    sink = transfer_sink(transfer.address, tmp_path, telemetry)
    sink.submit(FakeRendered(PromBatch(0, ()), items))
    assert sink.flush(10)
    sink.close(5)
    got = {g["tags"]: g["value"] for g in transfer.items() if g["metric"] == "PodFBUsed"}
    assert sorted(got.values()) == [float(i << 10) for i in range(1, len(NAMES) + 1)]  # MiB, one each
    pods = {dict(kv.split("=", 1) for kv in tags.split(","))["pod"] for tags in got}
    assert "a_b" in pods  # needed no change: as it is
    assert len(pods) == len(NAMES)
    assert all(p == "a_b" or (p.startswith("a_b-") and len(p) == 12) for p in pods), pods


def test_the_hash_is_stable_and_only_for_names() -> None:
    assert openfalcon.tag_value("pod", "a b") == openfalcon.tag_value("pod", "a b") != "a_b"
    assert openfalcon.tag_value("pod", "train-0.x") == "train-0.x"
    assert openfalcon.tag_value("model", "NVIDIA H100 80GB HBM3") == "NVIDIA_H100_80GB_HBM3"
    assert openfalcon.tag_value("resource", "nvidia.com/gpu") == "nvidia.com_gpu"
