"""Job records in the real Pushgateway: one group per pod holding every container's latest
record, and a record that waits through an outage while newer cycles replace the node's state."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from falcon_gpu.model.samples import PromGroup
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.schemas import falcon_gpu_jobs
from tests.delivery.conftest import FakeRendered, ManagedServer, http_get, prom_cycle
from tests.delivery.test_pushgateway import sink_for
from tests.jobs.helpers import MIG, Feeder, device, use

pytestmark = pytest.mark.servers
ENERGY = "falcon_gpu_job_record_energy_joules"


def job_lines(server: ManagedServer) -> list[str]:
    text = http_get(server.url + "/metrics").decode()
    return sorted(x for x in text.splitlines() if x.startswith("falcon_gpu_job_record_energy_joules{"))


def cycle_with(groups: tuple[PromGroup, ...], i: int) -> FakeRendered:
    return FakeRendered(prom_cycle(int(time.time() * 1000) + i, 0.5).prometheus, job_groups=groups)


def test_a_pod_group_keeps_every_container_and_gpu(
    pushgateway: ManagedServer, telemetry: Telemetry, tmp_path: Path
) -> None:
    f = Feeder(tmp_path)
    mig_dev = device(uuid="GPU-mig", index=3, util=None, mig=True)
    gpus = [device(), mig_dev]
    f.cycle([use("a", energy=0.0), use("b", energy=0.0, gpu="GPU-mig", mig=MIG)], devices=gpus)
    first = f.cycle([use("a", energy=12.5)], devices=gpus)  # b left the MIG instance
    f.cycle([use("a", energy=30.0)], devices=gpus)
    second = f.cycle([], devices=gpus)  # a done too
    sink = sink_for(pushgateway.url, telemetry)
    try:
        sink.submit(cycle_with(falcon_gpu_jobs.render(first.groups, f.now), 1))
        assert sink.flush(10)
        assert len(job_lines(pushgateway)) == 1
        sink.submit(cycle_with(falcon_gpu_jobs.render(second.groups, f.now), 2))
        assert sink.flush(10)
    finally:
        sink.close(5)
    job = 'instance="",job="falcon_gpu_job"'
    rest = 'model="NVIDIA H100 80GB HBM3",namespace="ml",node="node-a"'
    assert job_lines(pushgateway) == [
        f'{ENERGY}{{container="a",gpu="0",{job},{rest},pod="train-0",uuid="GPU-aaaa"}} 30',
        f'{ENERGY}{{container="b",gpu="3",gpu_instance="3",{job},'
        f'mig_profile="3g.40gb",mig_uuid="{MIG}",{rest},pod="train-0",uuid="GPU-mig"}} 0',
    ]


def test_a_record_is_delivered_after_an_outage_though_newer_cycles_replaced_the_state(
    pushgateway: ManagedServer, telemetry: Telemetry, tmp_path: Path
) -> None:
    f = Feeder(tmp_path)
    f.cycle([use("main", energy=0.0, memory=5 << 30)])
    f.cycle([use("main", energy=42.0, memory=5 << 30)])
    update = f.cycle([])
    sink = sink_for(pushgateway.url, telemetry)
    try:
        pushgateway.stop()
        sink.submit(cycle_with(falcon_gpu_jobs.render(update.groups, f.now), 0))
        for i in range(1, 5):  # newer cycles without records replace the waiting node state
            time.sleep(0.1)
            sink.submit(cycle_with((), i))
        pushgateway.start()
        assert sink.flush(20)
    finally:
        sink.close(5)
    (line,) = job_lines(pushgateway)
    assert 'container="main"' in line and line.endswith(" 42")
    text = http_get(pushgateway.url + "/metrics").decode()
    assert any(x.startswith("falcon_gpu_job_record_max_memory_bytes{") and x.endswith(" 5.36870912e+09")
               for x in text.splitlines())  # fmt: skip
