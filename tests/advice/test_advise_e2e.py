"""``falcon-gpu advise`` on records the real agent wrote over a scenario the test writes.

Four workloads on H100 80GB GPUs (the node also has one in MIG mode, from which NVML's profiles
are read): one peaking at 9 GiB and 12 % SM, one at 70 GiB, one small in memory but busy, and
one whose pod restarted three times under one controller.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.agent.advise import advise_command
from falcon_gpu.settings import Settings
from tests.advice.conftest import run_cycles, settings_for
from tests.advice.scenario import Node

CYCLES = 26
OWNER = {"kind": "ReplicaSet", "name": "trainer-7d4f8b9c5"}


def _node() -> Node:
    node = Node(gpus=4)
    # 20 cycles at 7.5 GiB / 10 % SM and one at 9 GiB / 12 %: the peak fits 1g.10gb (9.75 GiB,
    # 16 of 132 SMs) as it is, the p95 with 20 % on top
    node.pod(0, "small-x2k9z", [7.5] * 10 + [9.0] + [7.5] * 10, [10] * 10 + [12] + [10] * 10, start=1)
    node.pod(1, "big-b7q4m", [70.0] * 20, [50] * 20, start=1)
    node.pod(2, "busy-t6w8n", [5.0] * 20, [30] * 20, start=1)
    for i, name in enumerate(("trainer-a", "trainer-b", "trainer-c")):  # names no suffix rule groups
        node.pod(3, name, [30.0] * 6, [60] * 6, start=1 + 8 * i, owner=OWNER)
    return node


@pytest.fixture(scope="module")
def advised(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, Path, dict[str, Any], str]:
    tmp = tmp_path_factory.mktemp("advise")
    scenario = _node().write(tmp / "scenario.json")
    settings = settings_for(tmp)
    run_cycles(settings, scenario, CYCLES)
    return (
        settings,
        scenario,
        json.loads(advise(settings, scenario, as_json=True)),
        advise(settings, scenario),
    )


def advise(settings: Settings, scenario: Path, *, as_json: bool = False) -> str:
    out = io.StringIO()
    assert (
        advise_command(settings, simulate=str(scenario), namespace=None, since=None, as_json=as_json, out=out)
        == 0
    )
    return out.getvalue()


def _workload(body: dict[str, Any], name: str) -> dict[str, Any]:
    found = [w for w in body["workloads"] if w["workload"] == name]
    assert len(found) == 1, body["workloads"]
    return found[0]


def test_profiles_come_from_nvml_for_the_model(advised: tuple[Settings, Path, dict[str, Any], str]) -> None:
    body = advised[2]
    found = {p["name"]: p for p in body["mig_profiles"]["NVIDIA H100 80GB HBM3"]}
    assert set(found) == {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
    assert found["1g.10gb"]["memory_bytes"] == 9984 << 20 and found["1g.10gb"]["instances"] == 7


def test_a_small_pod_gets_the_smallest_slice(advised: tuple[Settings, Path, dict[str, Any], str]) -> None:
    small = _workload(advised[2], "small")
    assert small["memory_peak_bytes"] == 9 << 30
    assert 7.5 * (1 << 30) <= small["memory_p95_bytes"] <= 7.5 * 1.02 * (1 << 30)
    assert small["sm_p95_ratio"] == pytest.approx(0.10)
    assert small["placement"] == "1g.10gb" and small["held"] == 1


def test_a_pod_at_70_gib_gets_the_whole_gpu(advised: tuple[Settings, Path, dict[str, Any], str]) -> None:
    big = _workload(advised[2], "big")
    assert big["memory_peak_bytes"] == 70 << 30
    assert big["placement"] == "gpu" and big["recommended"] == 1


def test_memory_fits_a_slice_but_sm_does_not(advised: tuple[Settings, Path, dict[str, Any], str]) -> None:
    busy = _workload(advised[2], "busy")
    # 5 GiB fits 1g.10gb; 30 % SM x 1.2 needs more than 2g.20gb's 32 of 132 SMs: 3g.40gb (60 SMs)
    assert busy["placement"] == "3g.40gb"


def test_three_pods_of_one_controller_are_one_workload(
    advised: tuple[Settings, Path, dict[str, Any], str],
) -> None:
    trainer = _workload(advised[2], "trainer")
    assert trainer["pods"] == 3 and trainer["jobs"] == 3
    assert trainer["held"] == 1  # restarts one after another: one GPU at a time
    assert not any(w["workload"].startswith("trainer-") for w in advised[2]["workloads"])


def test_gpus_freed_and_the_table_fits_80_columns(
    advised: tuple[Settings, Path, dict[str, Any], str],
) -> None:
    body, text = advised[2], advised[3]
    recommended = {w["workload"]: w["placement"] for w in body["workloads"]}
    # the trainer's 60 % SM x 1.2 needs more than 4g.40gb's 64 of 132 SMs or half a GPU
    assert recommended == {"small": "1g.10gb", "big": "gpu", "busy": "3g.40gb", "trainer": "gpu"}
    assert body["gpus_freed"] == 1  # 4 GPUs held; 1/7 + 1 + 1/2 + 1 = 2.64 needed: 3
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    assert lines[0].split() == ["NAMESPACE/WORKLOAD", "PODS", "PEAK", "P95", "SM95", "RAN", "ADVICE"]
    assert any(line.startswith("ml/small ") and line.endswith("1g.10gb") for line in lines), text
    assert f"GPUs freed if every advice were taken: {body['gpus_freed']}" in text


def test_without_the_api_the_pod_name_rule_applies(tmp_path: Path) -> None:
    node = Node(gpus=1)
    for i, name in enumerate(("web-7d4f8b9c5-x2k9z", "web-7d4f8b9c5-b7q4m", "web-6c9d7f8b4-t6w8n")):
        node.pod(0, name, [4.0] * 3, [5] * 3, start=1 + 4 * i)
    scenario = node.write(tmp_path / "scenario.json")
    settings = settings_for(tmp_path, pod_labels=False)
    run_cycles(settings, scenario, 14)
    body = json.loads(advise(settings, scenario, as_json=True))
    assert [(w["workload"], w["pods"]) for w in body["workloads"]] == [("web", 3)]


def test_namespace_and_since_select(advised: tuple[Settings, Path, dict[str, Any], str]) -> None:
    settings, scenario = advised[0], advised[1]
    out = io.StringIO()
    assert advise_command(settings, simulate=str(scenario), namespace="other", since=None, out=out) == 0
    assert out.getvalue() == f"no job records matching under {settings.jobs_dir}\n"
    out = io.StringIO()  # every record ended moments ago: a day back keeps them all
    advise_command(settings, simulate=str(scenario), namespace="ml", since=86400, as_json=True, out=out)
    assert len(json.loads(out.getvalue())["workloads"]) == 4


def test_a_bad_headroom_flag_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    from falcon_gpu.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["advise", "--headroom", "9"])
    assert exited.value.code == 2
    assert "--headroom: expected a ratio from 0 to 4" in capsys.readouterr().err
