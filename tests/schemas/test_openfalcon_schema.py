"""The Open-Falcon schema: gpu-mon names and units, roll-ups, pods, and falcon-agent's rules."""

from __future__ import annotations

from msgspec.structs import replace

from falcon_gpu.model.samples import FalconItem
from falcon_gpu.schemas import openfalcon
from tests.schemas.fixtures import TRAIN, cycle


def item(items: tuple[FalconItem, ...], metric: str, tags: str) -> FalconItem:
    found = [i for i in items if i.metric == metric and i.tags == tags]
    assert len(found) == 1, (metric, tags, found)
    return found[0]


def assert_valid_falcon(items: tuple[FalconItem, ...]) -> None:
    for i in items:
        d = i.as_json()
        assert isinstance(d["timestamp"], int) and isinstance(d["step"], int)
        assert d["counterType"] in ("GAUGE", "COUNTER", "DERIVE")
        assert len(i.metric) + len(i.tags) <= 255
        for ch in "\r\n'\">":
            assert ch not in i.endpoint and ch not in i.metric + i.tags


def test_device_items_in_gpu_mon_units() -> None:
    items = openfalcon.render(cycle())
    assert_valid_falcon(items)
    tags = "GpuId=0,uuid=GPU-aaaa"
    assert item(items, "GPUUtils", tags).value == 73.0
    assert item(items, "MemUtils", tags).value == 40.0
    assert item(items, "FBUsed", tags).value == 20 * 1024
    assert item(items, "FBtotal", tags).value == 80 * 1024
    assert item(items, "SmClock", tags).value == 1980
    assert item(items, "PowerUsed", tags).value == 350.5
    assert item(items, "DoubleBitError", tags).value == 1
    assert item(items, "RPDoubleError", tags).value == 2
    assert item(items, "XidErrors", tags).value == 1
    assert item(items, "GPUHealth", tags).value == 2
    assert item(items, "GPUAlive", tags).value == 1
    first = items[0]
    assert first.endpoint == "node-a" and first.step == 30 and first.timestamp == 1_700_000_000


def test_lost_gpu_is_dead_and_excluded_from_rollups() -> None:
    items = openfalcon.render(cycle())
    assert item(items, "GPUAlive", "GpuId=2,uuid=GPU-cccc").value == 0
    assert item(items, "GPUHealth", "GpuId=2,uuid=GPU-cccc").value == 2
    assert item(items, "GPUUtils", "type=sum").value == 73.0  # only GPU 0 reports utilisation
    assert item(items, "FBUsed", "type=sum").value == 22 * 1024
    assert item(items, "FBUsed", "type=ave").value == 11 * 1024
    assert item(items, "GPUCount", "").value == 3


def test_pod_items() -> None:
    items = openfalcon.render(cycle())
    tags = "GpuId=0,namespace=ml,pod=train-0,container=main"
    assert item(items, "PodGPUUtils", tags).value == 55.0
    assert item(items, "PodFBUsed", tags).value == 20 * 1024
    assert item(items, "PodProcesses", tags).value == 1
    assert item(items, "PodGPUUtils", "GpuId=1,gi=1,namespace=serve,pod=infer-7,container=server").value == 0


def test_tags_sanitised_and_bounded() -> None:
    long_pod = replace(TRAIN, pod="p" * 300, namespace="ns with space/x")
    c = cycle()
    pods = (replace(c.attribution.pods[0], container=long_pod),)
    c = replace(c, attribution=replace(c.attribution, pods=pods))
    items = openfalcon.render(c)
    assert_valid_falcon(items)
    pod_items = [i for i in items if i.metric == "PodFBUsed"]
    assert "namespace=ns_with_space_x" in pod_items[0].tags
    assert len(pod_items[0].metric) + len(pod_items[0].tags) <= 254


def test_distinct_long_values_stay_distinct() -> None:
    a = openfalcon.format_tags("PodFBUsed", [("pod", "x" * 300 + "a")])
    b = openfalcon.format_tags("PodFBUsed", [("pod", "x" * 300 + "b")])
    assert a != b and len(a) <= 254 - len("PodFBUsed")


def test_non_finite_readings_are_left_out() -> None:
    c = cycle()
    dev = replace(c.snapshot.devices[0], power_watts=float("nan"), temperature_celsius=float("inf"))
    snap = replace(c.snapshot, devices=(dev, *c.snapshot.devices[1:]))
    items = openfalcon.render(replace(c, snapshot=snap))
    metrics = {i.metric for i in items if i.tags == "GpuId=0,uuid=GPU-aaaa"}
    assert "PowerUsed" not in metrics and "DeviceTemperature" not in metrics and "GPUUtils" in metrics


def test_gpu_count_per_model_beside_the_total() -> None:
    items = openfalcon.render(cycle())
    assert item(items, "GPUCount", "").value == 3
    per_model = {i.tags: i.value for i in items if i.metric == "GPUCount" and i.tags}
    assert per_model == {
        "model=NVIDIA_H100_80GB_HBM3": 1,
        "model=NVIDIA_A100-SXM4-40GB": 1,
        "model=NVIDIA_L4": 1,
    }


def test_tags_formatted_once_per_device_equal_formatting_each_item() -> None:
    """One device's (or pod's) items share their tags, formatted once; each item must still get exactly
    what formatting it alone gives, including the shortening that depends on the metric's length."""
    pod = replace(TRAIN, pod="p" * 190)  # fits beside PodFBUsed, too long beside PodGPUUtils
    c = cycle()
    pods = (replace(c.attribution.pods[0], container=pod),)
    c = replace(
        c,
        attribution=replace(c.attribution, pods=pods),
        extra_labels=(("cluster", "eu 1"),),
    )
    items = openfalcon.render(c)
    gpu0 = [("GpuId", "0"), ("uuid", "GPU-aaaa"), ("cluster", "eu 1")]
    pod_pairs = [("GpuId", "0"), ("namespace", "ml"), ("pod", "p" * 190), ("container", "main")]
    pod_pairs.append(("cluster", "eu 1"))
    for i in items:
        if i.tags.startswith("GpuId=0,uuid="):
            assert i.tags == openfalcon.format_tags(i.metric, gpu0) == "GpuId=0,uuid=GPU-aaaa,cluster=eu_1"
    by_metric = {i.metric: i.tags for i in items if "namespace=ml" in i.tags}
    assert set(by_metric) == {"PodGPUUtils", "PodFBUsed", "PodProcesses"}
    for metric, tags in by_metric.items():
        assert tags == openfalcon.format_tags(metric, pod_pairs), metric
    assert by_metric["PodFBUsed"].count("p") > by_metric["PodProcesses"].count("p")  # shortened for one
