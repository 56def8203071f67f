"""What the rendered ``falcon_gpu`` schema promises about pods (CONTRACT section 3), read from
the series themselves, for every bundled scenario, over several cycles of the real code path
(simulated NVML library, simulated host with its PodResources gRPC server, real attributor):

* per GPU: Σ pod memory + Σ unattributed memory = the device's memory used, exactly; per MIG
  instance the same against the instance's memory used;
* per GPU: Σ pod energy + unattributed energy = the device's energy used since the first cycle;
* a reading NVML does not give is absent, not 0: pod, process and unattributed utilisation
  (and pod energy) on GPUs without per-process utilisation.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from falcon_gpu.agent.cycle import CycleRunner
from falcon_gpu.agent.runtime import Runtime, build
from falcon_gpu.model.samples import PromBatch
from falcon_gpu.settings import Settings
from falcon_gpu.simulator.scenario.parse import load_scenario, resolve_scenario

BUNDLED = ("default", "shared-gpu", "mig-node", "faulty-node")
CYCLES = 4

Key = tuple[str, frozenset[tuple[str, str]]]


@dataclass
class Rendered:
    cycles: list[dict[Key, float]]
    falcon: list[tuple[str, str]]
    """(metric, tags) of the last cycle's Open-Falcon items."""


def series(batch: PromBatch) -> dict[Key, float]:
    return {(f.name, frozenset(s.labels)): s.value for f in batch.families for s in f.series}


def render_cycles(name: str, *, schema: str = "falcon_gpu", cycles: int = CYCLES) -> Rendered:
    settings = Settings(node="sim-node", process_metrics=True, schema=schema, sinks=[])  # type: ignore[call-arg]
    rt: Runtime = build(settings, simulate=name, with_sinks=False)
    try:
        rt.attributor.refresh_now()
        runner = CycleRunner(
            node="sim-node",
            step=30,
            source=rt.source,
            attributor=rt.attributor,
            sinks=[],
            telemetry=rt.telemetry,
            schema=schema,  # type: ignore[arg-type]
            process_metrics=True,
        )
        out = [runner.run() for _ in range(cycles)]
        return Rendered([series(r.prometheus) for r in out], [(i.metric, i.tags) for i in out[-1].falcon])
    finally:
        rt.close(1.0)


@pytest.fixture(scope="module", params=BUNDLED)
def rendered(request: pytest.FixtureRequest) -> Iterator[tuple[str, Rendered]]:
    yield request.param, render_cycles(request.param)


def pick(cycle: dict[Key, float], name: str, **want: str) -> list[tuple[dict[str, str], float]]:
    """Series of ``name`` whose labels match ``want`` ("" = the label is absent or empty)."""
    out = []
    for (n, lb), v in cycle.items():
        labels = dict(lb)
        if n == name and all(labels.get(k, "") == w for k, w in want.items()):
            out.append((labels, v))
    return out


def one(cycle: dict[Key, float], name: str, **want: str) -> float | None:
    hits = pick(cycle, name, **want)
    assert len(hits) <= 1, (name, want, hits)
    return hits[0][1] if hits else None


def total(cycle: dict[Key, float], name: str, **want: str) -> float:
    return sum(v for _, v in pick(cycle, name, **want))


def test_memory_pods_plus_unattributed_equal_the_device(rendered: tuple[str, Rendered]) -> None:
    name, run = rendered
    checked = 0
    for cycle in run.cycles:
        for labels, used in pick(cycle, "falcon_gpu_memory_used_bytes", mig_uuid=""):
            uuid = labels["uuid"]
            pods = total(cycle, "falcon_gpu_pod_memory_used_bytes", uuid=uuid)
            unattributed = total(cycle, "falcon_gpu_unattributed_memory_used_bytes", uuid=uuid)
            assert pods + unattributed == used, (name, uuid)
            checked += 1
            for mig, mig_used in pick(cycle, "falcon_gpu_memory_used_bytes", uuid=uuid):
                if "mig_uuid" not in mig:
                    continue
                m = mig["mig_uuid"]
                in_pods = total(cycle, "falcon_gpu_pod_memory_used_bytes", uuid=uuid, mig_uuid=m)
                rest = one(cycle, "falcon_gpu_unattributed_memory_used_bytes", uuid=uuid, mig_uuid=m)
                assert in_pods + (rest or 0) == mig_used, (name, m)
    assert checked >= 2 * len(run.cycles)


def test_energy_pods_plus_unattributed_equal_the_device(rendered: tuple[str, Rendered]) -> None:
    name, run = rendered
    first, last = run.cycles[0], run.cycles[-1]
    checked = 0
    for labels, joules in pick(last, "falcon_gpu_energy_joules_total"):
        uuid = labels["uuid"]
        start = one(first, "falcon_gpu_energy_joules_total", uuid=uuid)
        assert start is not None
        pods = total(last, "falcon_gpu_pod_energy_joules_total", uuid=uuid)
        unattributed = total(last, "falcon_gpu_unattributed_energy_joules_total", uuid=uuid)
        assert pods + unattributed == pytest.approx(joules - start), (name, uuid)
        assert joules > start
        checked += 1
    assert checked >= 1


def test_the_invariants_hold_with_driver_overhead() -> None:
    """The shared GPU's device memory is 5 GiB more than its processes report: it is unattributed."""
    cycle = render_cycles("shared-gpu", cycles=1).cycles[0]
    uuid = "GPU-fe49fb4c-3d29-111a-1278-513e4ab0ce96"
    assert one(cycle, "falcon_gpu_unattributed_memory_used_bytes", uuid=uuid) == 5 * (1 << 30)
    assert total(cycle, "falcon_gpu_pod_memory_used_bytes", uuid=uuid) == 9 * (1 << 30)


MIG_GPU = "GPU-46c8e822-d2e4-8a32-e8a6-a73afc7b0e27"


def test_absent_not_zero_where_nvml_has_no_process_utilisation() -> None:
    """faulty-node's GPU 2 answers NOT_SUPPORTED to process utilisation; mig-node's GPU 0 is
    MIG-enabled (NVML gives no per-process utilisation there), and in its first cycle GPM has one
    sample only. Their running pods have memory and process counts but no utilisation or energy
    series; other GPUs' pods keep theirs."""
    scenario = load_scenario(resolve_scenario("faulty-node"))
    unsupported = next(g.uuid for g in scenario.gpus if not g.supports("process_utilization"))
    for name, uuid, cycles in (("faulty-node", unsupported, 2), ("mig-node", MIG_GPU, 1)):
        run = render_cycles(name, cycles=cycles)
        cycle = run.cycles[-1]
        running = [lb for lb, n in pick(cycle, "falcon_gpu_pod_processes", uuid=uuid) if n > 0]
        assert running, f"{name}: the scenario runs a pod on {uuid}"
        for lb in running:
            assert one(cycle, "falcon_gpu_pod_memory_used_bytes", **lb) is not None
            assert one(cycle, "falcon_gpu_pod_utilization_ratio", **lb) is None, (name, lb)
            assert one(cycle, "falcon_gpu_pod_energy_joules_total", **lb) is None, (name, lb)
        processes = pick(cycle, "falcon_gpu_process_memory_used_bytes", uuid=uuid)
        assert processes
        for lb, _ in processes:
            assert one(cycle, "falcon_gpu_process_utilization_ratio", **lb) is None, (name, lb)
        gpu = next(lb["gpu"] for lb, _ in pick(cycle, "falcon_gpu_info", uuid=uuid))
        for lb in running:  # Open-Falcon: PodFBUsed, but no PodGPUUtils item for the running pods
            items = {m for m, t in run.falcon if t.startswith(f"GpuId={gpu},") and f"pod={lb['pod']}," in t}
            assert "PodFBUsed" in items and "PodGPUUtils" not in items, (name, lb["pod"], items)
        others = [v for lb, v in pick(cycle, "falcon_gpu_pod_utilization_ratio") if lb["uuid"] != uuid]
        assert cycles == 1 or any(v > 0 for v in others), (
            f"{name}: pods on GPUs with process utilisation keep it"
        )


def test_mig_pods_get_their_instances_sm_activity_and_a_share_of_the_energy() -> None:
    """mig-node's H100 answers GPM per GPU instance: from the second cycle each pod alone on its
    instance has that instance's SM activity as its utilisation (``falcon_gpu_sm_active_ratio`` of
    the instance), and the GPU's energy is shared out by it."""
    run = render_cycles("mig-node", cycles=3)
    cycle = run.cycles[-1]
    pods = pick(cycle, "falcon_gpu_pod_utilization_ratio", uuid=MIG_GPU)
    assert {lb["pod"] for lb, _ in pods} == {"bert-ft-0", "bert-ft-1", "llm-vllm-0", "llm-reserve-0"}
    for lb, value in pods:  # llm-reserve-0 holds an idle instance: 0, like its SM activity
        instance = one(cycle, "falcon_gpu_sm_active_ratio", uuid=MIG_GPU, mig_uuid=lb["mig_uuid"])
        assert value == instance and (value > 0) == (lb["pod"] != "llm-reserve-0"), lb
    # the board's energy rises 7400 J from cycle 0 to 1 (then stays): all of it goes to the pods,
    # in proportion to their instances' activity (0.85 : 0.25 : 0.6 in that cycle)
    first = {
        lb["pod"]: v for lb, v in pick(run.cycles[0], "falcon_gpu_pod_energy_joules_total", uuid=MIG_GPU)
    }
    second = {
        lb["pod"]: v for lb, v in pick(run.cycles[1], "falcon_gpu_pod_energy_joules_total", uuid=MIG_GPU)
    }
    assert first == {"llm-reserve-0": 0.0} and sum(second.values()) == pytest.approx(
        7400
    )  # idle: 0, not absent
    assert second["bert-ft-0"] / second["bert-ft-1"] == pytest.approx(0.85 / 0.25)
    assert second == {
        lb["pod"]: v for lb, v in pick(cycle, "falcon_gpu_pod_energy_joules_total", uuid=MIG_GPU)
    }
