"""The falcon_gpu Prometheus schema: names, labels and values of CONTRACT section 3."""

from __future__ import annotations

from msgspec.structs import replace

from falcon_gpu.model.samples import PromBatch
from falcon_gpu.schemas import falcon_gpu
from falcon_gpu.sinks.encoding import prom_text
from tests.schemas.fixtures import GIB, TS, cycle


def values(batch: PromBatch) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(f.name, frozenset(s.labels)): s.value for f in batch.families for s in f.series}


def find(batch: PromBatch, name: str, **labels: str) -> list[float]:
    want = set(labels.items())
    return [v for (n, lb), v in values(batch).items() if n == name and want <= lb]


def test_device_values_in_base_units() -> None:
    b = falcon_gpu.render(cycle())
    assert b.timestamp_ms == int(TS * 1000)
    g0 = {"gpu": "0", "uuid": "GPU-aaaa", "model": "NVIDIA H100 80GB HBM3", "node": "node-a"}
    assert find(b, "falcon_gpu_utilization_ratio", **g0) == [0.73]
    assert find(b, "falcon_gpu_memory_used_bytes", **g0, mig_uuid="") == []  # absent label, not ""
    assert 20 * GIB in find(b, "falcon_gpu_memory_used_bytes", **g0)
    assert find(b, "falcon_gpu_sm_clock_hertz", **g0) == [1980e6]
    assert find(b, "falcon_gpu_energy_joules_total", **g0) == [1350.5]
    assert find(b, "falcon_gpu_ecc_errors_total", uuid="GPU-aaaa", type="uncorrected", scope="aggregate") == [
        1
    ]
    assert find(b, "falcon_gpu_retired_pages", uuid="GPU-aaaa", cause="double_bit") == [2]
    assert find(b, "falcon_gpu_retired_pages_pending", uuid="GPU-aaaa") == [1]
    assert find(b, "falcon_gpu_remapped_rows", uuid="GPU-aaaa", type="correctable") == [4]
    assert find(b, "falcon_gpu_clock_event_active", uuid="GPU-aaaa", reason="sw_power_cap") == [1]
    assert find(b, "falcon_gpu_clock_event_active", uuid="GPU-aaaa", reason="hw_thermal") == [0]
    assert find(b, "falcon_gpu_xid_errors_total", uuid="GPU-aaaa", xid="79") == [1]
    assert find(b, "falcon_gpu_health", uuid="GPU-aaaa", check="xid") == [2]
    info = find(
        b,
        "falcon_gpu_info",
        uuid="GPU-aaaa",
        driver_version="550.54.15",
        cuda_version="12.4",
        pci_bus_id="00000000:18:00.0",
    )
    assert info == [1]


def test_lost_gpu_reports_up_zero_and_no_readings() -> None:
    b = falcon_gpu.render(cycle())
    assert find(b, "falcon_gpu_up", uuid="GPU-cccc") == [0]
    assert find(b, "falcon_gpu_up", uuid="GPU-aaaa") == [1]
    assert find(b, "falcon_gpu_health", uuid="GPU-cccc", check="lost") == [2]
    assert find(b, "falcon_gpu_temperature_celsius", uuid="GPU-cccc") == []


def test_absent_readings_emit_no_series() -> None:
    b = falcon_gpu.render(cycle())
    assert find(b, "falcon_gpu_temperature_celsius", uuid="GPU-bbbb") == []  # MIG GPU fixture has none
    assert find(b, "falcon_gpu_fan_speed_ratio", uuid="GPU-bbbb") == []


def test_mig_instance_series_carry_mig_labels() -> None:
    b = falcon_gpu.render(cycle())
    mig = {"mig_uuid": "MIG-1111", "gpu_instance": "1", "compute_instance": "0", "mig_profile": "1g.5gb"}
    assert find(b, "falcon_gpu_memory_used_bytes", **mig) == [GIB]
    assert find(b, "falcon_gpu_memory_free_bytes", **mig) == [4 * GIB]


def test_pod_series() -> None:
    b = falcon_gpu.render(cycle())
    pod = {
        "namespace": "ml",
        "pod": "train-0",
        "container": "main",
        "uuid": "GPU-aaaa",
        "label_team": "vision",
    }
    assert find(b, "falcon_gpu_pod_info", **pod, resource="nvidia.com/gpu", allocated="true") == [1]
    assert find(b, "falcon_gpu_pod_memory_used_bytes", **pod) == [20 * GIB]
    assert find(b, "falcon_gpu_pod_utilization_ratio", **pod) == [0.55]
    assert find(b, "falcon_gpu_pod_energy_joules_total", **pod) == [12.5]
    idle = find(b, "falcon_gpu_pod_allocation_idle_seconds", pod="infer-7", mig_uuid="MIG-1111")
    assert idle == [90.0]
    assert find(b, "falcon_gpu_unattributed_memory_used_bytes", uuid="GPU-aaaa") == [GIB]
    assert find(b, "falcon_gpu_unattributed_energy_joules_total", uuid="GPU-aaaa") == [7.5]
    assert find(b, "falcon_gpu_process_memory_used_bytes") == []  # process_metrics off


def test_pod_info_alone_carries_the_workload_its_owner_else_its_name_without_the_suffix() -> None:
    c = cycle()
    b = falcon_gpu.render(c)
    assert find(b, "falcon_gpu_pod_info", pod="train-0", workload="train") == [1]  # the ordinal dropped
    assert find(b, "falcon_gpu_pod_info", pod="infer-7", workload="infer") == [1]
    pods = [lb for (n, lb) in values(b) if n.startswith("falcon_gpu_pod_") and n != "falcon_gpu_pod_info"]
    assert pods and all("workload" not in dict(lb) for lb in pods)
    pod = c.attribution.pods[0]
    owned = replace(pod, container=replace(pod.container, owner="bert-finetune"))
    att = replace(c.attribution, pods=(owned, *c.attribution.pods[1:]))
    b = falcon_gpu.render(replace(c, attribution=att))
    assert find(b, "falcon_gpu_pod_info", pod="train-0", workload="bert-finetune") == [1]


def test_process_series_only_when_enabled() -> None:
    b = falcon_gpu.render(cycle(process_metrics=True))
    assert find(b, "falcon_gpu_process_memory_used_bytes", pid="4242", command="python", pod="train-0") == [
        20 * GIB
    ]


def test_agent_series() -> None:
    b = falcon_gpu.render(cycle())
    assert find(b, "falcon_gpu_agent_cycle_seconds", node="node-a") == [0.0123]
    assert find(b, "falcon_gpu_agent_errors_total", kind="gpu") == [1]
    assert find(b, "falcon_gpu_agent_samples_total", sink="stdout", outcome="sent") == [10]


def test_no_duplicate_series_and_sorted_label_names_unique() -> None:
    b = falcon_gpu.render(cycle(process_metrics=True))
    for f in b.families:
        keys = [s.labels for s in f.series]
        assert len(keys) == len(set(keys)), f.name
        for lb in keys:
            names = [k for k, _ in lb]
            assert len(names) == len(set(names)), (f.name, names)


def test_text_format_escapes_label_values() -> None:
    text = prom_text.encode(falcon_gpu.render(cycle()))
    assert "# TYPE falcon_gpu_energy_joules_total counter" in text
    assert 'falcon_gpu_utilization_ratio{node="node-a",gpu="0",uuid="GPU-aaaa",' in text
    assert prom_text.escape_label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
