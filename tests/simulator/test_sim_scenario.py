"""Scenario parsing: the bundled files, name resolution, and errors that name the JSON path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from falcon_gpu.simulator.scenario.host_model import PodResourcesDevice
from falcon_gpu.simulator.scenario.parse import (
    Scenario,
    ScenarioError,
    at,
    bundled_names,
    load_scenario,
    parse_scenario,
    resolve_scenario,
)

REPO = Path(__file__).resolve().parents[2]
BUNDLED = ("mixed-4gpu", "mig-node", "shared-gpu", "faulty-node", "policy-node", "job-node", "gb200-nvl")


def minimal_gpu(**extra: object) -> dict[str, object]:
    gpu: dict[str, object] = {"uuid": "GPU-1", "name": "NVIDIA L4", "pci_bus_id": "00000000:01:00.0"}
    gpu.update(extra)
    return gpu


def error_of(data: object) -> str:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data)
    return str(info.value)


# -- the bundled files -----------------------------------------------------------
def test_bundled_names_are_the_shipped_scenarios() -> None:
    assert set(bundled_names()) == set(BUNDLED)


@pytest.mark.parametrize("name", BUNDLED)
def test_conf_scenarios_point_at_the_packaged_ones(name: str) -> None:
    """conf/scenarios/ holds links to the package's files: one copy to edit, shipped by pip."""
    conf = REPO / "conf" / "scenarios" / f"{name}.json"
    assert conf.resolve() == resolve_scenario(name).resolve()


def test_default_is_the_mixed_four_gpu_node() -> None:
    for arg in (None, "", "default"):
        path = resolve_scenario(arg)
        assert path == resolve_scenario("mixed-4gpu")
    scenario = load_scenario(resolve_scenario(None))
    assert len(scenario.gpus) == 4
    assert len({g.name for g in scenario.gpus}) == 3
    assert scenario.host is not None


def _strip_replica(device_id: str) -> str:
    return device_id.split("::", 1)[0]


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_host_sections_are_consistent(name: str) -> None:
    scenario = load_scenario(resolve_scenario(name))
    host = scenario.host
    assert host is not None
    uuids = {g.uuid for g in scenario.gpus} | {m.uuid for g in scenario.gpus for m in g.mig}
    pids = {p.pid for g in scenario.gpus for p in g.processes}
    pids |= {p.pid for g in scenario.gpus for m in g.mig for p in m.processes}
    assert set(host.proc_cgroups) <= pids
    container_ids = set()
    for pid, cgroup in host.proc_cgroups.items():
        assert cgroup.startswith("0::/"), pid
        match = re.search(r"cri-containerd-([0-9a-f]{64})\.scope", cgroup)
        if match:
            container_ids.add(match.group(1))
        else:
            assert "/system.slice/" in cgroup
    pod_dirs = {entry.rsplit("_", 1)[0] for entry in host.log_pods}
    log_containers = {}
    for entry in host.log_containers:
        stem, cid = entry[: -len(".log")].rsplit("-", 1)
        assert re.fullmatch(r"[0-9a-f]{64}", cid), entry
        log_containers[stem] = cid
    assert container_ids <= set(log_containers.values())
    for pod in host.pod_resources:
        assert f"{pod.namespace}_{pod.name}" in pod_dirs
        for container in pod.containers:
            assert f"{pod.name}_{pod.namespace}_{container.name}" in log_containers
            for device in container.devices:
                assert device.resource_name.startswith("nvidia.com/")
                assert {_strip_replica(d) for d in device.device_ids} <= uuids


def test_shared_gpu_has_the_cases_attribution_needs() -> None:
    scenario = load_scenario(resolve_scenario("shared-gpu"))
    host = scenario.host
    assert host is not None
    shared = [
        pod
        for pod in host.pod_resources
        for c in pod.containers
        for d in c.devices
        if d.resource_name == "nvidia.com/gpu.shared" and all("::" in i for i in d.device_ids)
    ]
    assert len({p.name for p in shared}) == 3
    assert any(len(p.containers) == 2 for p in host.pod_resources)
    assert any("/system.slice/" in cg for cg in host.proc_cgroups.values())
    cgroups = "".join(host.proc_cgroups.values())
    without_process = []
    for pod in host.pod_resources:
        ids = [
            e[:-4].rsplit("-", 1)[1]
            for e in host.log_containers
            if e.startswith(f"{pod.name}_{pod.namespace}_")
        ]
        assert ids, pod.name
        if not any(cid in cgroups for cid in ids):
            without_process.append(pod.name)
    assert without_process == ["idle-reservation-0"]


def test_mig_node_allocatable_and_profiles() -> None:
    scenario = load_scenario(resolve_scenario("mig-node"))
    assert scenario.host is not None
    mig_gpu = scenario.gpus[0]
    assert [m.profile for m in mig_gpu.mig] == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert scenario.host.allocatable == (
        PodResourcesDevice("nvidia.com/gpu", (scenario.gpus[1].uuid,)),
        PodResourcesDevice("nvidia.com/mig-1g.10gb", (mig_gpu.mig[0].uuid, mig_gpu.mig[1].uuid)),
        PodResourcesDevice("nvidia.com/mig-2g.20gb", (mig_gpu.mig[2].uuid,)),
        PodResourcesDevice("nvidia.com/mig-3g.40gb", (mig_gpu.mig[3].uuid,)),
    )


def test_faulty_node_has_every_fault() -> None:
    scenario = load_scenario(resolve_scenario("faulty-node"))
    assert any(g.lost_at_cycle is not None for g in scenario.gpus)
    assert {x.xid for g in scenario.gpus for x in g.xid_events} >= {48, 79}
    ecc = scenario.gpus[0].ecc
    assert ecc is not None and ecc.corrected_volatile is not None and len(set(ecc.corrected_volatile)) > 1
    assert set(scenario.gpus[0].clock_event_reasons or ()) >= {"hw_thermal", "sw_power_cap"}
    assert scenario.gpus[0].retired_pages is not None and scenario.gpus[0].retired_pages.pending
    assert scenario.gpus[0].remapped_rows is not None and scenario.gpus[0].remapped_rows.pending
    assert any(g.not_supported for g in scenario.gpus)


# -- values ---------------------------------------------------------------------------
def test_series_values_and_the_last_repeating() -> None:
    scenario = parse_scenario({"gpus": [minimal_gpu(memory_used_bytes=[1, 2.5], power_watts=7)]})
    assert scenario.driver_version == "550.54.15" and scenario.cuda_version == "12.4"
    values = scenario.gpus[0].values
    assert [at(values["memory_used_bytes"], c) for c in range(4)] == [1.0, 2.5, 2.5, 2.5]
    assert at(values["power_watts"], 9) == 7.0
    assert "fan_speed_percent" not in values
    bare = parse_scenario({"gpus": [{"uuid": "GPU-x", "name": "n"}, {"uuid": "GPU-y", "name": "n"}]})
    assert [g.pci_bus_id for g in bare.gpus] == ["00000000:01:00.0", "00000000:02:00.0"]


def test_host_section_is_typed() -> None:
    scenario = parse_scenario(
        {
            "gpus": [minimal_gpu()],
            "host": {
                "proc": {"42": {"cgroup": "0::/system.slice/x.service\n"}},
                "pod_resources": [
                    {
                        "namespace": "ns",
                        "name": "p",
                        "containers": [
                            {
                                "name": "c",
                                "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-1"]}],
                            }
                        ],
                    }
                ],
                "log_containers": ["p_ns_c-" + "a" * 64 + ".log"],
                "log_pods": ["ns_p_uid"],
            },
        }
    )
    host = scenario.host
    assert host is not None
    assert host.proc_cgroups == {42: "0::/system.slice/x.service\n"}
    assert host.pod_resources[0].containers[0].devices[0].device_ids == ("GPU-1",)
    assert host.allocatable == (PodResourcesDevice("nvidia.com/gpu", ("GPU-1",)),)


# -- errors -------------------------------------------------------------------------
def test_bad_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"gpus": [\n  {"uuid": "GPU-1",,}\n]}')
    with pytest.raises(ScenarioError, match=r"bad\.json: not valid JSON at line 2 column 20"):
        load_scenario(path)


def test_missing_file_and_unknown_name() -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(Path("/nonexistent/x.json"))
    with pytest.raises(ScenarioError, match=r"^no-such-node: no such scenario file.*mig-node"):
        resolve_scenario("no-such-node")


def test_path_is_resolved_as_a_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"gpus": []}))
    assert resolve_scenario(str(path)) == path
    assert load_scenario(path) == Scenario("550.54.15", "12.4", (), None)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"gpus": [minimal_gpu(ecc={"bogus": 1})]}, "gpus[0].ecc.bogus: unknown key"),
        (
            {"gpus": [minimal_gpu(), minimal_gpu(uuid="GPU-2", memory_used_bytes="x")]},
            "gpus[1].memory_used_bytes: expected a number or a list of numbers, got 'x'",
        ),
        (
            {"gpus": [minimal_gpu(memory_used_bytes=[1, True])]},
            "gpus[0].memory_used_bytes: expected a number",
        ),
        ({"gpus": [minimal_gpu(memory_used_bytes=[])]}, "gpus[0].memory_used_bytes: expected a number"),
        ({"gpus": [minimal_gpu(fan=3)]}, "gpus[0].fan: unknown key"),
        ({"gpus": [minimal_gpu(name=5)]}, "gpus[0].name: expected a string, got 5"),
        ({"gpus": [{"uuid": "GPU-1", "pci_bus_id": "x"}]}, "gpus[0].name: expected a string, missing"),
        ({"gpus": [minimal_gpu(not_supported=["fan"])]}, "gpus[0].not_supported[0]: unknown reading 'fan'"),
        (
            {"gpus": [minimal_gpu(clock_event_reasons=["slow"])]},
            "gpus[0].clock_event_reasons[0]: unknown reason",
        ),
        ({"gpus": [minimal_gpu(lost_at_cycle="2")]}, "gpus[0].lost_at_cycle: expected an integer"),
        (
            {"gpus": [minimal_gpu(xid_events=[{"cycle": 1}])]},
            "gpus[0].xid_events[0].xid: expected an integer",
        ),
        (
            {"gpus": [minimal_gpu(processes=[{"pid": 1, "type": "cuda"}])]},
            "gpus[0].processes[0].type: expected one of",
        ),
        (
            {"gpus": [minimal_gpu(processes=[{"pid": 1, "cmd": "x"}])]},
            "gpus[0].processes[0].cmd: unknown key",
        ),
        (
            {"gpus": [minimal_gpu(mig=[{"gpu_instance_id": 1, "profile": "1g.5gb"}])]},
            "gpus[0].mig[0].uuid: expected",
        ),
        (
            {"gpus": [minimal_gpu(retired_pages={"pending": "yes"})]},
            "gpus[0].retired_pages.pending: expected true",
        ),
        (
            {"gpus": [minimal_gpu(processes=[{"pid": 1, "until_cycle": "3"}])]},
            "gpus[0].processes[0].until_cycle: expected an integer",
        ),
        (
            {"gpus": [minimal_gpu(processes=[{"pid": 1, "from_cycle": -1}])]},
            "gpus[0].processes[0].from_cycle: expected a cycle number (0 or more), got -1",
        ),
        (
            {
                "gpus": [
                    minimal_gpu(
                        mig=[
                            {
                                "gpu_instance_id": 1,
                                "profile": "1g.5gb",
                                "uuid": "MIG-1",
                                "processes": [{"pid": 1, "from_cycle": 2, "until_cycle": 2}],
                            }
                        ]
                    )
                ]
            },
            "gpus[0].mig[0].processes[0].until_cycle: expected a cycle after from_cycle (2), got 2",
        ),
        (
            {
                "gpus": [
                    minimal_gpu(
                        mig=[{"gpu_instance_id": 1, "profile": "1g.5gb", "uuid": "M", "until_cycle": 0}]
                    )
                ]
            },
            "gpus[0].mig[0].until_cycle: expected a cycle after from_cycle (0), got 0",
        ),
        (
            {"gpus": [minimal_gpu(mig_mode=[1, 2])]},
            "gpus[0].mig_mode: expected 1 (MIG on) or 0 (off) per cycle",
        ),
        ({"gpus": {"uuid": "x"}}, "gpus: expected a list"),
        ({"gpus": [], "extra": 1}, "extra: unknown key"),
        ({"gpus": [minimal_gpu(), minimal_gpu()]}, "gpus: uuid 'GPU-1' appears twice"),
        ({"gpus": [], "host": {"proc": {"abc": {"cgroup": "x"}}}}, "host.proc.abc: expected a process id"),
        ({"gpus": [], "host": {"proc": {"1": {"cgroup": "x", "y": 1}}}}, "host.proc.1.y: unknown key"),
        (
            {
                "gpus": [],
                "host": {
                    "pod_resources": [
                        {
                            "namespace": "n",
                            "name": "p",
                            "containers": [
                                {"name": "c", "devices": [{"resource_name": "r", "device_ids": [1]}]}
                            ],
                        }
                    ]
                },
            },
            "host.pod_resources[0].containers[0].devices[0].device_ids[0]: expected a string",
        ),
        ({"gpus": [], "host": {"log_pods": "x"}}, "host.log_pods: expected a list"),
        ({"gpus": [], "host": {"kubelet": 1}}, "host.kubelet: unknown key"),
        ([1], "<top>: expected an object"),
    ],
)
def test_errors_start_with_the_json_path(data: object, message: str) -> None:
    assert error_of(data).startswith(message)
