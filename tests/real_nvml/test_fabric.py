"""NVLink fabric state and health (issue 20, item 4) through nvidia-ml-py's real ctypes code.

``nvmlDeviceGetGpuFabricInfoV`` on the mock's GB200 / GB300 profiles (and H100, whose HGX baseboard
has a fabric too, its state "auto": completed while no fabric manager is configured), on a variant
this test writes (one GPU still registering, one whose fabric reports degraded bandwidth and an
unhealthy route, one with an incorrect configuration), and on T4 / A100, which have none. Expected
values come from the profile YAML, decoded here on NVML's documented mask layout
(``NVML_GPU_FABRIC_HEALTH_MASK_*``), not from the agent's code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.real_nvml import mock

STATES = {"not_supported": 0, "not_started": 1, "in_progress": 2, "completed": 3, "auto": 3}
"""The profile's ``fabric.state`` -> NVML's state ("auto": completed, as no fabric manager runs)."""
CONDITIONS = ("degraded_bandwidth", "route_recovery", "route_unhealthy", "access_timeout_recovery")
"""Each at two bits, from bit 0 up: 1 TRUE, 2 FALSE."""
CONFIGURATIONS = ("not_supported", "none", "incorrect_sysguid", "incorrect_chassis_sn", "no_partition",
                  "insufficient_nvlinks")  # fmt: skip
"""``incorrect_configuration`` by name -> its 4-bit code at bit 8."""
DCGM_STATUS = {0: 0, 1: 1, 2: 2, 3: 3}
"""NVML state (registration status success) -> dcgmFabricManagerStatus_t."""


def expected_fabric(profile: dict[str, Any], index: int) -> dict[str, Any]:
    """What the profile says GPU ``index``'s fabric answers: state, clique, cluster, mask, faults."""
    device = profile["devices"][index]
    fabric = device.get("fabric") or profile["device_defaults"]["fabric"]
    health = fabric.get("health") or {}
    mask = 0
    faults = set()
    for i, name in enumerate(CONDITIONS):
        holds = bool(health.get(name, False))
        mask |= (1 if holds else 2) << (2 * i)
        if holds:
            faults.add(name)
    config = CONFIGURATIONS.index(health.get("incorrect_configuration", "none"))
    mask |= config << 8
    if config > 1:
        faults.add("incorrect_configuration")
    return {
        "uuid": device["uuid"],
        "state": STATES[fabric.get("state", "completed")],
        "clique_id": int(fabric.get("clique_id", 0)),
        "cluster_uuid": fabric["cluster_uuid"].lower(),
        "mask": mask,
        "faults": faults,
    }


def run_once(lib_dir: Path, tmp: Path, profile: dict[str, Any], schema: str, fmt: str) -> str:
    """``falcon-gpu run --once`` on the real bindings; its stdout in ``fmt``. A GPU without a fabric
    adds no log line (most GPUs have none: NOT_SUPPORTED is logged at debug)."""
    profile_path = mock.write_profile(profile, tmp / f"profile-{schema}-{fmt}.yaml")
    config = tmp / f"{schema}-{fmt}.toml"
    config.write_text(
        f'schema = "{schema}"\nnode = "n1"\nkubernetes = "off"\nproc_root = "{tmp}"\n'
        f'[[sinks]]\ntype = "stdout"\nformat = "{fmt}"\n'
    )
    env = mock.environment(lib_dir, profile_path)
    done = mock.falcon_gpu(["run", "--once", "--config", str(config)], env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "fabric" not in done.stderr.lower(), done.stderr
    return done.stdout


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]


def by_uuid(text: str, name: str, uuid_label: str = "uuid") -> dict[str, tuple[dict[str, str], float]]:
    return {labels[uuid_label]: (labels, value) for n, labels, value in samples(text) if n == name}


def falcon_items(text: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line.strip():
            out.extend(json.loads(line))
    return out


def variant() -> dict[str, Any]:
    """GB200 with GPU 1 still registering (a route recovering), GPU 2 degraded with an unhealthy route,
    GPU 3 on a partition with too few NVLinks; the others as shipped."""
    profile = mock.load_profile("gb200")
    base = dict(profile["device_defaults"]["fabric"])
    profile["devices"][1]["fabric"] = {**base, "state": "in_progress", "health": {"route_recovery": True}}
    profile["devices"][2]["fabric"] = {
        **base, "clique_id": 7, "health": {"degraded_bandwidth": True, "route_unhealthy": True}
    }  # fmt: skip
    profile["devices"][3]["fabric"] = {**base, "health": {"incorrect_configuration": "insufficient_nvlinks"}}
    return profile


def check_falcon_gpu(text: str, profile: dict[str, Any]) -> None:
    state, mask, info = (by_uuid(text, f"falcon_gpu_fabric_{n}") for n in ("state", "health_mask", "info"))
    health = {
        labels["uuid"]: value
        for n, labels, value in samples(text)
        if n == "falcon_gpu_health" and labels["check"] == "fabric"
    }
    faults: dict[str, dict[str, float]] = {}
    for n, labels, value in samples(text):
        if n == "falcon_gpu_fabric_fault":
            faults.setdefault(labels["uuid"], {})[labels["condition"]] = value
    assert len(state) == len(profile["devices"])
    for i in range(len(profile["devices"])):
        want = expected_fabric(profile, i)
        uuid = want["uuid"]
        assert state[uuid][1] == want["state"], uuid
        assert mask[uuid][1] == want["mask"], uuid
        labels = info[uuid][0]
        assert (labels["clique_id"], labels["cluster_uuid"]) == (str(want["clique_id"]), want["cluster_uuid"])
        assert {c for c, v in faults[uuid].items() if v == 1} == want["faults"], uuid
        assert set(faults[uuid]) == {*CONDITIONS, "incorrect_configuration"}
        failing = want["state"] != 3 or bool(want["faults"])
        assert health[uuid] == (2 if failing else 0), uuid


@pytest.mark.parametrize("name", ["gb200", "gb300", "h100"])
def test_fabric_series_and_check_as_the_profile_says(nvml_lib_dir: Path, tmp_path: Path, name: str) -> None:
    profile = mock.load_profile(name)
    check_falcon_gpu(run_once(nvml_lib_dir, tmp_path, profile, "falcon_gpu", "prometheus"), profile)


def test_a_gpu_registering_or_degraded_fails_the_fabric_check(nvml_lib_dir: Path, tmp_path: Path) -> None:
    profile = variant()
    text = run_once(nvml_lib_dir, tmp_path, profile, "falcon_gpu", "prometheus")
    check_falcon_gpu(text, profile)
    health = {
        labels["uuid"]: value
        for n, labels, value in samples(text)
        if n == "falcon_gpu_health" and labels["check"] == "fabric"
    }
    uuids = [d["uuid"] for d in profile["devices"]]
    assert [health[u] for u in uuids[:5]] == [0, 2, 2, 2, 0]


@pytest.mark.parametrize("name", ["gb300", "variant"])
def test_dcgm_fabric_fields(nvml_lib_dir: Path, tmp_path: Path, name: str) -> None:
    profile = variant() if name == "variant" else mock.load_profile(name)
    text = run_once(nvml_lib_dir, tmp_path, profile, "dcgm", "prometheus")
    fields = ("MANAGER_STATUS", "CLIQUE_ID", "HEALTH_MASK")
    status, clique, mask = (by_uuid(text, f"DCGM_FI_DEV_FABRIC_{n}", "UUID") for n in fields)
    for i in range(len(profile["devices"])):
        want = expected_fabric(profile, i)
        labels, value = status[want["uuid"]]
        assert value == DCGM_STATUS[want["state"]]
        assert labels["DCGM_FI_DEV_FABRIC_CLUSTER_UUID"] == want["cluster_uuid"]
        assert clique[want["uuid"]][1] == want["clique_id"]
        assert mask[want["uuid"]][1] == want["mask"]


def test_openfalcon_fabric_items(nvml_lib_dir: Path, tmp_path: Path) -> None:
    profile = variant()
    items = falcon_items(run_once(nvml_lib_dir, tmp_path, profile, "falcon_gpu", "falcon"))
    for i in range(len(profile["devices"])):
        want = expected_fabric(profile, i)
        mine = {it["metric"]: it["value"] for it in items if f"uuid={want['uuid']}" in it["tags"]}
        assert mine["FabricState"] == want["state"]
        assert mine["FabricFaults"] == len(want["faults"])
        if want["state"] != 3 or want["faults"]:
            assert mine["GPUHealth"] == 2, want["uuid"]


@pytest.mark.parametrize("name", ["t4", "a100"])
@pytest.mark.parametrize(("schema", "fmt"), [("falcon_gpu", "prometheus"), ("dcgm", "prometheus"),
                                             ("falcon_gpu", "falcon")])  # fmt: skip
def test_no_fabric_no_fabric_series(
    nvml_lib_dir: Path, tmp_path: Path, name: str, schema: str, fmt: str
) -> None:
    """Before Hopper NVML answers NOT_SUPPORTED: no fabric series, no fabric check, the rest as usual; the
    fabric reader ran and succeeded (its answer: nothing)."""
    profile = mock.load_profile(name)
    text = run_once(nvml_lib_dir, tmp_path, profile, schema, fmt)
    if fmt == "falcon":
        metrics = {it["metric"] for it in falcon_items(text)}
        assert "GPUAlive" in metrics
        assert not {m for m in metrics if m.startswith("Fabric")}
        return
    names = {n for n, _, _ in samples(text)}
    assert {"falcon_gpu_up", "DCGM_FI_DEV_GPU_TEMP"} & names
    assert not {n for n in names if "fabric" in n.lower()}
    assert not [s for s in samples(text) if s[1].get("check") == "fabric"]
    reader = "falcon_gpu_agent_reader_success"
    readers = {labels["reader"]: value for n, labels, value in samples(text) if n == reader}
    assert readers["fabric"] == 1
