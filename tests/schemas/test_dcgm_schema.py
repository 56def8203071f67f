"""The dcgm schema keeps dcgm-exporter's names, labels and units; MIG per GPU instance; XID texts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from msgspec.structs import replace

from falcon_gpu.health import HealthEvaluator
from falcon_gpu.model.attribution import Attribution, ContainerRef, PodUsage
from falcon_gpu.model.cycle import CycleData, HealthReport
from falcon_gpu.model.samples import PromBatch
from falcon_gpu.model.snapshot import MigReading, Snapshot
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.schemas import dcgm
from falcon_gpu.schemas.xid_catalog import UNKNOWN, xid_message
from falcon_gpu.simulator.nvml.library import SimulatedNvml
from falcon_gpu.simulator.scenario.parse import resolve_scenario
from falcon_gpu.sources.nvml.xid import XidWatcher
from tests.agent.test_cli_e2e import cli, first, parse_prom
from tests.nvml.helpers import gpu, scenario_of, source_on
from tests.schemas.fixtures import GIB, INFER, cycle, mig_device

MIB = 1 << 20
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def series_of(b: PromBatch) -> Series:
    return {(f.name, frozenset(s.labels)): s.value for f in b.families for s in f.series}


def matching(vals: Series, name: str, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
    return {lb: v for (n, lb), v in vals.items() if n == name and set(labels.items()) <= lb}


def keys(lb: frozenset[tuple[str, str]]) -> set[str]:
    return {k for k, _ in lb}


def test_dcgm_names_units_and_owner_labels() -> None:
    b = dcgm.render(cycle())
    vals = series_of(b)

    def one(name: str, **labels: str) -> float:
        hits = list(matching(vals, name, **labels).values())
        assert len(hits) == 1, (name, labels, hits)
        return hits[0]

    assert (
        one(
            "DCGM_FI_DEV_GPU_UTIL",
            UUID="GPU-aaaa",
            gpu="0",
            device="nvidia0",
            Hostname="node-a",
            modelName="NVIDIA H100 80GB HBM3",
            pod="train-0",
            namespace="ml",
            container="main",
        )
        == 73
    )
    assert one("DCGM_FI_DEV_FB_USED", UUID="GPU-aaaa") == 20 * 1024
    assert one("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", UUID="GPU-aaaa") == 1350500
    assert one("DCGM_FI_DEV_SM_CLOCK", UUID="GPU-aaaa") == 1980
    assert (
        one("DCGM_FI_DEV_XID_ERRORS", UUID="GPU-aaaa", err_code="79", err_msg="GPU has fallen off the bus")
        == 79
    )
    assert one("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", UUID="GPU-aaaa") == 4  # sw_power_cap bit
    assert one("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", UUID="GPU-aaaa") == 1
    kinds = {f.name: f.kind for f in b.families}
    assert kinds["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "counter"
    assert kinds["DCGM_FI_DEV_GPU_UTIL"] == "gauge"
    assert "falcon_gpu_pod_memory_used_bytes" in kinds  # per-pod numbers kept


def test_mig_gpu_reports_memory_per_gpu_instance_with_only_that_instances_pod() -> None:
    vals = series_of(dcgm.render(cycle()))
    (lb,) = matching(vals, "DCGM_FI_DEV_FB_USED", UUID="GPU-bbbb")
    assert dict(lb) == {
        "gpu": "1",
        "UUID": "GPU-bbbb",
        "device": "nvidia1",
        "modelName": "NVIDIA A100-SXM4-40GB",
        "Hostname": "node-a",
        "pci_bus_id": "00000000:3b:00.0",
        "DCGM_FI_DRIVER_VERSION": "550.54.15",
        "GPU_I_PROFILE": "1g.5gb",
        "GPU_I_ID": "1",
        "pod": "infer-7",
        "namespace": "serve",
        "container": "server",
    }
    assert vals[("DCGM_FI_DEV_FB_USED", lb)] == 1024  # the instance's 1 GiB, not the board's 2 GiB
    assert list(matching(vals, "DCGM_FI_DEV_FB_FREE", UUID="GPU-bbbb", GPU_I_ID="1").values()) == [4096]
    board = {lb for (n, lb) in vals if n.startswith("DCGM_") and ("UUID", "GPU-bbbb") in lb}
    whole = {lb for lb in board if "GPU_I_ID" not in keys(lb)}
    assert whole, "the board's own readings are still reported"
    assert all(not keys(lb) & {"pod", "namespace", "container", "GPU_I_PROFILE"} for lb in whole)
    (xid,) = matching(vals, "DCGM_FI_DEV_XID_ERRORS", UUID="GPU-bbbb")
    assert "GPU_I_ID" not in keys(xid) and ("err_code", "0") in xid


def two_instance_cycle() -> tuple[CycleData, ContainerRef, ContainerRef]:
    """A GPU instance split into two compute instances, each held by another container."""
    a, b_, c = (ContainerRef("ns", f"p{i}", "main") for i in range(3))
    dev = replace(
        mig_device(),
        mig=(
            MigReading(1, 0, "1g.5gb", "MIG-1", memory_total_bytes=5 * GIB, memory_used_bytes=GIB),
            MigReading(2, 0, "1c.3g.20gb", "MIG-2a", memory_total_bytes=20 * GIB, memory_used_bytes=3 * GIB),
            MigReading(2, 1, "1c.3g.20gb", "MIG-2b", memory_total_bytes=20 * GIB, memory_used_bytes=3 * GIB),
        ),
    )
    pods = tuple(
        PodUsage(who, "GPU-bbbb", mig, resource="nvidia.com/mig-x", allocated=True)
        for who, mig in ((a, "MIG-1"), (b_, "MIG-2a"), (c, "MIG-2b"))
    )
    base = cycle()
    snap = replace(base.snapshot, devices=(dev,))
    return replace(base, snapshot=snap, attribution=Attribution(pods=pods)), a, b_


def test_compute_instances_of_one_gpu_instance_are_one_series_shared_so_no_pod() -> None:
    cyc, a, _ = two_instance_cycle()
    used = matching(series_of(dcgm.render(cyc)), "DCGM_FI_DEV_FB_USED")
    by_gi = {dict(lb)["GPU_I_ID"]: (lb, v) for lb, v in used.items()}
    assert set(by_gi) == {"1", "2"}
    gi1, gi2 = dict(by_gi["1"][0]), dict(by_gi["2"][0])
    assert (gi1["pod"], gi1["GPU_I_PROFILE"]) == (a.pod, "1g.5gb")
    assert gi2["GPU_I_PROFILE"] == "3g.20gb"  # the GPU instance's profile, not the compute instance's
    assert "pod" not in gi2, "two containers share GPU instance 2: no one pod is named"
    assert by_gi["2"][1] == 3 * 1024  # counted once, not once per compute instance


def test_mig_enabled_gpu_without_instances_reports_its_own_memory() -> None:
    base = cycle()
    snap = replace(base.snapshot, devices=(replace(mig_device(), mig=()),))
    used = matching(series_of(dcgm.render(replace(base, snapshot=snap))), "DCGM_FI_DEV_FB_USED")
    assert [(("GPU_I_ID" in keys(lb)), v) for lb, v in used.items()] == [(False, 2048)]


def test_no_whole_gpu_series_carries_a_slice_pod_on_the_bundled_mig_node(tmp_path: Path) -> None:
    """The real CLI on mig-node: each GPU instance names exactly the pod the scenario gave it."""
    config = tmp_path / "falcon-gpu.toml"
    config.write_text('schema = "dcgm"\nnode = "mig-a"\n')
    out = cli("run", "--simulate", "mig-node", "--once", "--config", str(config))
    assert out.returncode == 0, out.stderr
    vals = parse_prom(out.stdout)
    scenario = json.loads(resolve_scenario("mig-node").read_text())
    h100 = scenario["gpus"][0]
    holder = {
        d: p["name"]
        for p in scenario["host"]["pod_resources"]
        for c in p["containers"]
        for dev in c["devices"]
        for d in dev["device_ids"]
    }
    want = {
        (str(m["gpu_instance_id"]), m["profile"], holder[m["uuid"]], first(m["memory_used_bytes"]) / MIB)
        for m in h100["mig"]  # run --once is cycle 0: the first of a per-cycle list
    }
    got = {
        (dict(lb)["GPU_I_ID"], dict(lb)["GPU_I_PROFILE"], dict(lb)["pod"], v)
        for lb, v in matching(vals, "DCGM_FI_DEV_FB_USED", UUID=h100["uuid"]).items()
    }
    assert got == want
    on_h100 = [lb for (n, lb) in vals if n.startswith("DCGM_") and ("UUID", h100["uuid"]) in lb]
    assert all("GPU_I_ID" in keys(lb) for lb in on_h100 if "pod" in keys(lb))
    assert len(matching(vals, "DCGM_FI_DEV_POWER_USAGE", UUID=h100["uuid"])) == 1, "the board once"
    a100 = scenario["gpus"][1]
    (temp,) = matching(vals, "DCGM_FI_DEV_GPU_TEMP", UUID=a100["uuid"])
    assert dict(temp)["pod"] == holder[a100["uuid"]]  # a whole GPU held by one container keeps its pod


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (0, "No Error"),
        (13, "Graphics Engine Exception"),
        (31, "GPU memory page fault"),
        (48, "Double Bit ECC Error"),
        (79, "GPU has fallen off the bus"),
        (94, "Contained ECC error"),
        (95, "Uncontained ECC error"),
        (119, "GSP RPC Timeout"),
        (140, "Unrecovered ECC Error"),
        (999, UNKNOWN),
    ],
)
def test_xid_catalogue(code: int, text: str) -> None:
    assert xid_message(code) == text


def test_unknown_xid_keeps_its_code_and_reads_unknown() -> None:
    base = cycle()
    health = {**base.health, "GPU-aaaa": HealthReport({"xid": 1}, last_xid=201)}
    vals = series_of(dcgm.render(replace(base, health=health)))
    (lb,) = matching(vals, "DCGM_FI_DEV_XID_ERRORS", UUID="GPU-aaaa")
    assert ("err_code", "201") in lb and ("err_msg", "Unknown Error") in lb
    assert vals[("DCGM_FI_DEV_XID_ERRORS", lb)] == 201


def test_xid_errors_is_the_most_recent_xid_not_the_most_critical() -> None:
    """XID 79 (critical) then 13 in one interval: dcgm-exporter's XID_ERRORS is 13, the check still fails."""
    events = [{"cycle": 1, "xid": 79}, {"cycle": 1, "xid": 13}, {"cycle": 3, "xid": 31}]
    sim = SimulatedNvml(scenario_of(gpu("GPU-x", xid_events=events)))
    xid = XidWatcher(sim, Telemetry())
    source, _ = source_on(sim, xid=xid)
    evaluator = HealthEvaluator()
    seen = []
    for ts in (0.0, 30.0, 60.0, 90.0):
        snap: Snapshot = source.collect(ts)
        report = evaluator.evaluate(snap)["GPU-x"]
        seen.append((snap.devices[0].last_xid, report.last_xid, report.checks["xid"]))
    xid.stop()
    # 31 is the newest, but 79's 5-minute hold still fails the check
    assert seen == [(None, None, 0), (13, 13, 2), (13, 13, 2), (31, 31, 2)]
    base = cycle()
    snap_cycle = replace(base, snapshot=snap, attribution=Attribution(), health={"GPU-x": report})
    vals = series_of(dcgm.render(snap_cycle))
    (lb,) = matching(vals, "DCGM_FI_DEV_XID_ERRORS", UUID="GPU-x")
    assert ("err_code", "31") in lb and ("err_msg", "GPU memory page fault") in lb


def test_instance_pod_labels_come_only_from_kubelet_allocations() -> None:
    """A container seen running on an instance but not allocated it names no pod (dcgm-exporter's rule)."""
    base = cycle()
    seen_only = PodUsage(INFER, "GPU-bbbb", "MIG-1111", allocated=False, memory_used_bytes=GIB)
    vals = series_of(dcgm.render(replace(base, attribution=Attribution(pods=(seen_only,)))))
    (lb,) = matching(vals, "DCGM_FI_DEV_FB_USED", UUID="GPU-bbbb")
    assert "pod" not in keys(lb) and ("GPU_I_ID", "1") in lb
