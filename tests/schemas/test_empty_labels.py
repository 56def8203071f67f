"""An empty label value is left out of the series, in every schema; no series is dropped for it."""

from __future__ import annotations

from msgspec.structs import replace

from falcon_gpu.model.attribution import ProcessUsage
from falcon_gpu.model.samples import Labels
from falcon_gpu.schemas import dcgm, falcon_gpu, openfalcon
from falcon_gpu.schemas.builder import FamilyBuilder, MetricSpec, without_empty
from tests.schemas.fixtures import cycle

PROC = "falcon_gpu_process_memory_used_bytes"


def test_builder_leaves_empty_values_out_and_keeps_the_series() -> None:
    b = FamilyBuilder((MetricSpec("m", "gauge", ""),))
    shared: Labels = (("gpu", "0"), ("pod", ""), ("container", ""))
    b.add("m", shared, 1)
    b.add("m", (("gpu", "1"), ("pod", "p")), 2)
    b.add("m", (("gpu", "2"), ("pod", "")), 3)
    ((family),) = b.families()
    assert [(s.labels, s.value) for s in family.series] == [
        ((("gpu", "0"),), 1.0),
        ((("gpu", "1"), ("pod", "p")), 2.0),
        ((("gpu", "2"),), 3.0),
    ]
    clean: Labels = (("gpu", "0"),)
    assert without_empty(clean) is clean, "no copy when nothing is empty"


def test_no_prometheus_schema_emits_an_empty_label_and_unowned_gpus_keep_their_series() -> None:
    data = cycle(process_metrics=True)
    for batch in (falcon_gpu.render(data), dcgm.render(data)):
        empty = [
            (f.name, s.labels) for f in batch.families for s in f.series if any(v == "" for _, v in s.labels)
        ]
        assert empty == []
    pid = ProcessUsage(900, "Xorg", "GPU-aaaa", memory_used_bytes=1, utilization_ratio=None, container=None)
    data = replace(data, attribution=replace(data.attribution, pods=(), processes=(pid,)))
    (proc,) = [s for f in falcon_gpu.render(data).families if f.name.startswith(PROC) for s in f.series]
    assert "pod" not in dict(proc.labels) and dict(proc.labels)["pid"] == "900", "a process in no pod"
    xid = [s for f in dcgm.render(data).families if f.name == "DCGM_FI_DEV_XID_ERRORS" for s in f.series]
    assert {dict(s.labels)["UUID"] for s in xid} == {d.uuid for d in data.snapshot.devices if d.up}
    assert any("pod" not in dict(s.labels) for s in xid), "a GPU held by no single container keeps its series"


def test_open_falcon_leaves_empty_tags_out() -> None:
    assert (
        openfalcon.format_tags("PodFBUsed", [("GpuId", "0"), ("container", ""), ("pod", "p")])
        == "GpuId=0,pod=p"
    )
    items = openfalcon.render(cycle(process_metrics=True))
    assert all("=," not in i.tags and not i.tags.endswith("=") for i in items)
