"""Label tuples kept per identity across cycles (schemas/label_cache.py): reused while the identity
holds, new when it changes, bounded; and the output they give is the output fresh tuples gave."""

from __future__ import annotations

from msgspec.structs import replace

from falcon_gpu.model.cycle import CycleData, HealthReport
from falcon_gpu.model.samples import PromBatch
from falcon_gpu.model.snapshot import MigReading, NvlinkErrors, NvlinkReading
from falcon_gpu.schemas import dcgm, falcon_gpu
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec
from falcon_gpu.schemas.falcon_gpu_device import DeviceLabelSets
from falcon_gpu.schemas.label_cache import LabelCache
from falcon_gpu.schemas.render import SWEEP_EVERY, SchemaRenderer
from falcon_gpu.schemas.selection import EVERYTHING
from falcon_gpu.schemas.xid_catalog import xid_message
from falcon_gpu.sinks.encoding import prom_text
from tests.schemas.fixtures import cycle, full_device

PER_DEVICE = (
    "falcon_gpu_up",
    "falcon_gpu_ecc_errors_total",
    "falcon_gpu_xid_errors_total",
    "falcon_gpu_nvlink_errors_total",
    "falcon_gpu_clock_event_active",
    "falcon_gpu_health",
)


def labels_of(batch: PromBatch, name: str) -> list[dict[str, str]]:
    return [dict(s.labels) for f in batch.families if f.name == name for s in f.series]


def with_device(c: CycleData, **changes: object) -> CycleData:
    devices = (replace(c.snapshot.devices[0], **changes), *c.snapshot.devices[1:])
    return replace(c, snapshot=replace(c.snapshot, devices=devices))


def assert_same_label_objects(one: PromBatch, two: PromBatch, *names: str) -> None:
    """Two renders of equal cycles: each series of ``names`` has the very same label tuple in both."""
    for name in names:
        a = next(f for f in one.families if f.name == name).series
        b = next(f for f in two.families if f.name == name).series
        assert a and all(x.labels is y.labels for x, y in zip(a, b, strict=True)), name


def test_cache_builds_once_per_key_and_a_sweep_drops_what_was_not_asked_for() -> None:
    built: list[int] = []
    cache: LabelCache[int, tuple[int]] = LabelCache(lambda k: (built.append(k), (k,))[1])
    first = cache.get(1)
    assert cache.get(1) is first and built == [1], "the same key is built once"
    for k in range(2, 5000):
        cache.get(k)
    assert len(cache) == 4999, "no size limit: as many keys as asked for"
    cache.sweep()
    assert cache.get(1) is first and cache.get(2) == (2,) and len(cache) == 4999, "kept for one period"
    cache.sweep()
    assert len(cache) == 2 and cache.get(1) is first, "the keys not asked for in a whole period went"
    cache.sweep()
    cache.sweep()
    assert len(cache) == 0 and cache.get(1) == (1,) and built.count(1) == 2, "a dropped key is rebuilt"


def test_a_renderer_keeps_the_pods_of_the_last_two_sweep_periods_only() -> None:
    """One new pod every cycle for 100 cycles (a busy node): the renderer's pod labels stay bounded
    by the pods it met in the last two periods, and a pod there all along keeps its very tuples."""
    renderer = SchemaRenderer("falcon_gpu")
    c = cycle()
    pod = c.attribution.pods[0]
    kept_pod: object = None
    for n in range(100):
        churned = replace(pod, container=replace(pod.container, pod=f"batch-{n}"))
        batch = renderer.render(with_attribution(c, pods=(churned, *c.attribution.pods[1:])), EVERYTHING)
        (stayed,) = [
            s.labels
            for f in batch.families
            if f.name == "falcon_gpu_pod_memory_used_bytes"
            for s in f.series
            if dict(s.labels)["pod"] == c.attribution.pods[1].container.pod
        ]
        assert kept_pod is None or stayed is kept_pod, f"cycle {n}: the staying pod's labels were rebuilt"
        kept_pod = stayed
        assert f'pod="batch-{n}"' in prom_text.encode(batch)
    pods = renderer.kept.pods.pods
    assert len(pods) <= 2 * SWEEP_EVERY + len(c.attribution.pods), len(pods)


def test_device_labels_are_the_same_tuple_every_cycle() -> None:
    kept = falcon_gpu.Caches()
    one, two = falcon_gpu.render(cycle(), kept=kept), falcon_gpu.render(cycle(), kept=kept)
    assert_same_label_objects(one, two, "falcon_gpu_up", "falcon_gpu_info", "falcon_gpu_ecc_errors_total")
    assert_same_label_objects(one, two, "falcon_gpu_sm_active_ratio", "falcon_gpu_memory_used_bytes")
    assert prom_text.encode(one) == prom_text.encode(two)


def test_a_changed_identity_changes_every_label_it_is_in() -> None:
    c = cycle()
    kept = falcon_gpu.Caches()
    falcon_gpu.render(c, kept=kept)
    before = kept.devices.labels(c.base_labels, c.snapshot.devices[0])
    renamed = with_device(c, uuid="GPU-eeee", name="NVIDIA H200")
    renamed = replace(renamed, health={**c.health, "GPU-eeee": c.health["GPU-aaaa"]})
    out = falcon_gpu.render(renamed, kept=kept)
    assert kept.devices.labels(renamed.base_labels, renamed.snapshot.devices[0]) is not before
    for name in PER_DEVICE:
        got = [lb for lb in labels_of(out, name) if lb.get("gpu") == "0"]
        assert got and all(lb["uuid"] == "GPU-eeee" and lb["model"] == "NVIDIA H200" for lb in got), name
    text = prom_text.encode(out)
    assert 'uuid="GPU-aaaa"' not in text and 'uuid="GPU-eeee"' in text


def test_node_labels_driver_and_pci_bus_are_part_of_the_identity() -> None:
    c = replace(cycle(), node_labels=(("node", "node-b"), ("site", "x")))
    c = replace(c, snapshot=replace(c.snapshot, driver_version="560.1"))
    c = with_device(c, pci_bus_id="00000000:99:00.0")
    (info,) = [lb for lb in labels_of(falcon_gpu.render(c), "falcon_gpu_info") if lb["gpu"] == "0"]
    assert info["node"] == "node-b" and info["site"] == "x"
    assert info["driver_version"] == "560.1" and info["pci_bus_id"] == "00000000:99:00.0"
    (again,) = [lb for lb in labels_of(falcon_gpu.render(cycle()), "falcon_gpu_info") if lb["gpu"] == "0"]
    assert again["node"] == "node-a" and again["driver_version"] == "550.54.15" and "site" not in again


def test_new_links_xids_and_mig_devices_get_labels_of_their_own() -> None:
    c = with_device(
        cycle(),
        xid_counts={79: 1, 48: 2},
        nvlink=(NvlinkReading(5, NvlinkErrors(1, 2, 3, 4)),),
        mig=(
            MigReading(
                uuid="MIG-9", gpu_instance_id=7, compute_instance_id=0, profile="", memory_used_bytes=5
            ),
        ),
    )
    out = falcon_gpu.render(c)
    xids = {lb["xid"] for lb in labels_of(out, "falcon_gpu_xid_errors_total") if lb["gpu"] == "0"}
    assert xids == {"48", "79"}
    links = [
        (lb["link"], lb["type"])
        for lb in labels_of(out, "falcon_gpu_nvlink_errors_total")
        if lb["gpu"] == "0"
    ]
    assert links == [("5", "crc_flit"), ("5", "crc_data"), ("5", "replay"), ("5", "recovery")]
    (mig,) = [lb for lb in labels_of(out, "falcon_gpu_memory_used_bytes") if lb.get("mig_uuid") == "MIG-9"]
    assert mig["gpu_instance"] == "7" and "mig_profile" not in mig, "an empty profile is no label"


def test_put_stores_clean_labels_as_given_and_skips_absent_values() -> None:
    b = FamilyBuilder((MetricSpec("m", "gauge", "h"),))
    lb = (("node", "n"),)
    b.put("m", lb, None)
    assert b.families() == ()
    b.put("m", lb, True)
    (fam,) = b.families()
    assert fam.series[0].labels is lb and fam.series[0].value == 1.0


def test_a_device_added_later_gets_labels_without_its_empty_values() -> None:
    dev = replace((full_device(index=3, uuid="GPU-dddd")), name="")
    labels = DeviceLabelSets().labels((("node", "n"),), dev)
    assert labels == (("node", "n"), ("gpu", "3"), ("uuid", "GPU-dddd"))


def with_attribution(c: CycleData, **changes: object) -> CycleData:
    return replace(c, attribution=replace(c.attribution, **changes))


def test_pod_and_process_labels_are_reused_and_follow_a_change() -> None:
    c = cycle(process_metrics=True)
    kept = falcon_gpu.Caches()
    one, two = falcon_gpu.render(c, kept=kept), falcon_gpu.render(cycle(process_metrics=True), kept=kept)
    assert_same_label_objects(
        one,
        two,
        "falcon_gpu_pod_info",
        "falcon_gpu_pod_memory_used_bytes",
        "falcon_gpu_process_memory_used_bytes",
    )
    pod = c.attribution.pods[0]
    moved = replace(
        pod,
        container=replace(pod.container, pod="train-1", labels=(("label_team", "nlp"),)),
        claim_name="gpu-claim",
    )
    proc = replace(c.attribution.processes[0], pid=5151, command="torchrun", container=moved.container)
    out = falcon_gpu.render(
        with_attribution(c, pods=(moved, *c.attribution.pods[1:]), processes=(proc,)), kept=kept
    )
    mem = [lb for lb in labels_of(out, "falcon_gpu_pod_memory_used_bytes") if lb["gpu"] == "0"]
    assert [(lb["pod"], lb["label_team"]) for lb in mem] == [("train-1", "nlp")]
    (info,) = [lb for lb in labels_of(out, "falcon_gpu_pod_info") if lb["gpu"] == "0"]
    assert info["claim_name"] == "gpu-claim" and info["pod"] == "train-1"
    (process,) = labels_of(out, "falcon_gpu_process_memory_used_bytes")
    assert (process["pid"], process["command"], process["pod"]) == ("5151", "torchrun", "train-1")
    assert "train-0" not in prom_text.encode(out)


def test_dcgm_labels_are_reused_and_follow_the_gpu_its_pod_and_its_xid() -> None:
    c = cycle()
    kept = dcgm.Caches()
    one, two = dcgm.render(c, kept=kept), dcgm.render(cycle(), kept=kept)
    assert_same_label_objects(
        one, two, "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_USED"
    )
    pod = c.attribution.pods[0]
    moved = replace(pod, gpu_uuid="GPU-eeee", container=replace(pod.container, pod="train-1"))
    changed = with_device(with_attribution(c, pods=(moved, *c.attribution.pods[1:])), uuid="GPU-eeee")
    health = {**c.health, "GPU-eeee": HealthReport({"xid": 2}, {48: 1}, last_xid=48)}
    out = dcgm.render(replace(changed, health=health), kept=kept)
    (temp,) = [lb for lb in labels_of(out, "DCGM_FI_DEV_GPU_TEMP") if lb["gpu"] == "0"]
    assert (temp["UUID"], temp["pod"]) == ("GPU-eeee", "train-1")
    (xid,) = [lb for lb in labels_of(out, "DCGM_FI_DEV_XID_ERRORS") if lb["gpu"] == "0"]
    assert (xid["UUID"], xid["err_code"], xid["err_msg"]) == ("GPU-eeee", "48", xid_message(48))
    assert "train-0" not in prom_text.encode(out)
