"""End to end through the simulator: the scenario's NVML library, the real NVML source, the
SimulatedHost (proc tree, log dirs, PodResources gRPC server) and the real Attributor.

Pod numbers must equal the scenario's per-process numbers, pods + unattributed must equal
the device totals, and the energy shares must add up to the device's energy used."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from falcon_gpu.attribution import AttributionSettings, Attributor
from falcon_gpu.model.attribution import Attribution
from falcon_gpu.model.snapshot import Snapshot
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import Settings
from falcon_gpu.simulator.node.layout import SimulatedHost
from falcon_gpu.simulator.scenario.parse import Scenario, at, load_scenario, resolve_scenario
from tests.nvml.helpers import expected_processes

nvml_source = pytest.importorskip("falcon_gpu.sources.nvml.source")
nvml_library = pytest.importorskip("falcon_gpu.sources.nvml.library")

CYCLES = 4
INTERVAL = 30.0
_CID = re.compile(r"[0-9a-f]{64}")


@dataclass
class Run:
    scenario: Scenario
    snapshots: list[Snapshot]
    results: list[Attribution]
    attributor: Attributor
    host: SimulatedHost


def expected_containers(scenario: Scenario) -> dict[int, tuple[str, str, str] | None]:
    """pid -> (namespace, pod, container) as the scenario's host section defines it."""
    assert scenario.host is not None
    by_cid: dict[str, tuple[str, str, str]] = {}
    for name in scenario.host.log_containers:
        pod, namespace, rest = name[: -len(".log")].split("_")
        container, cid = rest.rsplit("-", 1)
        by_cid[cid] = (namespace, pod, container)
    out: dict[int, tuple[str, str, str] | None] = {}
    for pid, text in scenario.host.proc_cgroups.items():
        m = _CID.search(text.split("pod", 1)[-1]) if "kubepods" in text else None
        out[pid] = by_cid.get(m.group(0)) if m else None
    return out


def run_scenario(name: str) -> Iterator[Run]:
    scenario = load_scenario(resolve_scenario(name))
    assert scenario.host is not None
    host = SimulatedHost(scenario.host)
    paths = host.start()
    settings = Settings(
        proc_root=paths.proc_root,
        log_root=paths.log_root,
        kubelet_socket=paths.kubelet_socket,
        docker_root=paths.docker_root,
        containers_root=paths.containers_root,
        passwd_file=paths.passwd_file,
        node="sim-node",
        interval=INTERVAL,
        process_metrics=True,
    )
    now = [0.0]
    telemetry = Telemetry()
    attributor = Attributor(AttributionSettings.of(settings), telemetry, clock=lambda: now[0])
    source = nvml_source.NvmlSource(nvml_library.load_nvml(scenario), telemetry)
    try:
        attributor.refresh_now()
        snapshots, results = [], []
        for cycle in range(CYCLES):
            now[0] = cycle * INTERVAL
            snap = source.collect(1.7e9 + now[0])
            snapshots.append(snap)
            results.append(attributor.attribute(snap))
        yield Run(scenario, snapshots, results, attributor, host)
    finally:
        source.close()
        attributor.close()
        host.stop()


@pytest.fixture(params=["shared-gpu", "mig-node"])
def run(request: pytest.FixtureRequest) -> Iterator[Run]:
    yield from run_scenario(request.param)


def test_pod_numbers_equal_the_scenarios_processes(run: Run) -> None:
    expected = expected_containers(run.scenario)
    for cycle, (snap, result) in enumerate(zip(run.snapshots, run.results, strict=True)):
        assert result.sources_ok == {"cgroup": True, "kubelet": True, "logs": True}
        want: dict[tuple[tuple[str, str, str], str], list[float]] = {}
        # MIG-enabled GPUs: no per-process utilisation from NVML; with GPM each process has its part
        # of its instance's SM activity (from the second cycle: GPM needs two samples)
        no_process_util = {
            g.uuid
            for g in run.scenario.gpus
            if (g.mig and (g.gpm is None or cycle == 0)) or not g.supports("process_utilization")
        }
        for gpu in run.scenario.gpus:
            procs = list(gpu.processes) + [p for m in gpu.mig for p in m.processes]
            shares = {pid: v["sm_util_ratio"] for (pid, _), v in expected_processes(gpu, cycle).items()}
            for p in procs:
                who = expected.get(p.pid)
                if who is None:
                    continue
                mem = at(p.used_memory_bytes, cycle) if p.used_memory_bytes else 0
                sm = at(p.sm_util_percent, cycle) / 100 if p.sm_util_percent else 0.0
                if gpu.mig:
                    sm = shares[p.pid] or 0.0
                entry = want.setdefault((who, gpu.uuid), [0, 0.0, 0])
                entry[0] += mem
                entry[1] += sm
                entry[2] += 1
        got = {
            ((p.container.namespace, p.container.pod, p.container.container), p.gpu_uuid): p
            for p in result.pods
            if p.processes
        }
        assert set(got) == set(want), f"cycle {cycle}"
        for k, (mem, sm, n) in want.items():
            assert got[k].memory_used_bytes == mem
            if k[1] in no_process_util:  # NVML gives no per-process utilisation there
                assert (got[k].utilization_ratio, got[k].energy_joules_total) == (None, None)
            else:
                assert got[k].utilization_ratio == pytest.approx(min(1.0, sm))
            assert got[k].processes == n
        for dev in snap.devices:
            pods = [p for p in result.pods if p.gpu_uuid == dev.uuid]
            unattr = [u for u in result.unattributed if u.gpu_uuid == dev.uuid]
            procs = {p.pid: p for p in result.processes if p.gpu_uuid == dev.uuid}
            memory = sum(p.memory_used_bytes for p in pods) + sum(u.memory_used_bytes or 0 for u in unattr)
            assert memory == dev.memory_used_bytes
            assert sum(p.processes for p in pods) + sum(u.processes for u in unattr) == len(procs)


def test_energy_shares_add_up_to_the_device(run: Run) -> None:
    last = run.results[-1]
    for dev0, devn in zip(run.snapshots[0].devices, run.snapshots[-1].devices, strict=True):
        assert dev0.energy_joules is not None and devn.energy_joules is not None
        used = devn.energy_joules - dev0.energy_joules
        shared = sum(p.energy_joules_total or 0.0 for p in last.pods if p.gpu_uuid == devn.uuid)
        shared += sum(u.energy_joules_total for u in last.unattributed if u.gpu_uuid == devn.uuid)
        assert shared == pytest.approx(used)


def test_shared_gpu_scenario_in_detail() -> None:
    for run in run_scenario("shared-gpu"):
        first = run.results[0]
        pods = {(p.container.pod, p.container.container, p.gpu_uuid): p for p in first.pods}
        shared = "GPU-fe49fb4c-3d29-111a-1278-513e4ab0ce96"
        # three pods on one time-sliced GPU, each its own numbers, replicas ::n collapsed
        alice = pods[("jupyter-alice", "notebook", shared)]
        assert (alice.memory_used_bytes, alice.utilization_ratio) == (4294967296, pytest.approx(0.30))
        assert alice.resource == "nvidia.com/gpu.shared" and alice.allocated
        assert pods[("jupyter-bob", "notebook", shared)].memory_used_bytes == 3221225472
        assert pods[("dashboard-render-6f7c9", "render", shared)].utilization_ratio == pytest.approx(0.20)
        assert sum(1 for k in pods if k[2] == shared) == 3
        # one pod, two containers on two GPUs
        pipeline = sorted((c, g) for p, c, g in pods if p == "pipeline-0")
        assert [c for c, _ in pipeline] == ["preprocess", "train"] and pipeline[0][1] != pipeline[1][1]
        # the host process outside Kubernetes stays unattributed
        host = next(u for u in first.unattributed if u.gpu_uuid == shared and u.mig_uuid is None)
        # and with it the memory no process reports (driver overhead): device 14 GiB - pods' 9 GiB
        assert (host.processes, host.memory_used_bytes) == (1, 15032385536 - 9 * (1 << 30))
        # the allocated pod that never runs anything: idle for as long as the agent has watched
        idle = [p for p in run.results[-1].pods if p.container.pod == "idle-reservation-0"]
        assert [(p.allocated, p.processes, p.allocation_idle_seconds) for p in idle] == [
            (True, 0, (CYCLES - 1) * INTERVAL)
        ]
        # doctor rows
        rows = {check: (ok, detail) for check, ok, detail in run.attributor.diagnose(run.snapshots[-1])}
        assert [rows[k][0] for k in ("host PIDs visible", "kubelet socket", "log dirs")] == ["OK"] * 3
        assert rows["GPU processes attributed"] == (
            "OK",
            "5 of 5 GPU processes in pods attributed to a container; 1 in no pod",
        )


def test_mig_pods_per_instance() -> None:
    for run in run_scenario("mig-node"):
        pods = {p.container.pod: p for p in run.results[0].pods}
        assert pods["bert-ft-0"].mig_uuid == "MIG-839bf86a-5b41-d2d3-dd0a-c235eb416f85"
        assert pods["bert-ft-1"].mig_uuid == "MIG-89ea9ff1-2f63-743a-5117-118da20a3c9b"
        assert pods["llm-vllm-0"].resource == "nvidia.com/mig-2g.20gb"
        reserve = pods["llm-reserve-0"]
        assert (reserve.allocated, reserve.processes, reserve.mig_uuid) == (
            True,
            0,
            "MIG-4d6ce253-a456-0055-db89-e11dc3b88f03",
        )
