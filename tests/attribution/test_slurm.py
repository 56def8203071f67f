"""Slurm jobs (issue 13 item 3): the job step from the cgroup path (Slurm's v1 and v2
layouts), the uid from the path or ``/proc/<pid>/status``, the user from the host's passwd,
the series through a real Prometheus, ``hpc_job`` on dcgm device series and the Open-Falcon
items; a Kubernetes pod next to Slurm jobs keeps pods + unattributed = device."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from falcon_gpu.attribution import AttributionSettings, Attributor
from falcon_gpu.attribution.slurm_cgroup import SlurmStep, parse_slurm_cgroup
from falcon_gpu.model.attribution import Attribution
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.snapshot import Snapshot
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.schemas import dcgm, openfalcon
from falcon_gpu.settings import Settings
from tests.attribution.conftest import run_once_into
from tests.delivery.conftest import ManagedServer, prom_query

from .helpers import GIB, HostTree, container_id, gpu, pod_uid, proc, snapshot, train_pod_host

V1 = "12:memory:/slurm/uid_1000/job_4242/step_0/task_0\n11:devices:/slurm/uid_1000/job_4242/step_0\n0::/\n"
V2 = "0::/system.slice/slurmstepd.scope/job_77/step_batch/user/task_0\n"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (V1, SlurmStep("4242", "0", 1000)),
        (V2, SlurmStep("77", "batch", None)),
        (
            "0::/system.slice/slurmstepd.scope/job_77/step_extern/user/task_special\n",
            SlurmStep("77", "extern"),
        ),
        (
            "0::/system.slice/node1_slurmstepd.scope/job_8/step_3/user/task_1\n",
            SlurmStep("8", "3"),
        ),  # multi-slurmd
        ("4:cpuset:/slurm_node1/uid_0/job_9/step_interactive/task_0\n", SlurmStep("9", "interactive", 0)),
        ("0::/system.slice/slurmstepd.scope/job_77/step_batch/slurm\n", None),  # slurmstepd itself
        ("0::/system.slice/slurmstepd.scope/system\n", None),
        ("0::/system.slice/slurmd.service\n", None),
        ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
        ("4:memory:/slurm/uid_1000/job_x/step_0\n", None),
        ("garbage\n", None),
    ],
)
def test_the_job_step_and_uid_come_from_slurms_cgroup_paths(text: str, found: SlurmStep | None) -> None:
    assert parse_slurm_cgroup(text) == found


def settings(tmp_path: Path, tree: HostTree) -> Settings:
    return Settings(
        proc_root=tree.proc,
        log_root=tree.log,
        kubelet_socket=tmp_path / "none.sock",
        docker_root=tmp_path / "docker",
        containers_root=tmp_path / "containers",
        passwd_file=tmp_path / "passwd",
        kubernetes="off",
        node="n1",
    )


def slurm_host(tmp_path: Path) -> tuple[HostTree, Snapshot]:
    tree = HostTree(tmp_path)
    tree.process(10, V1)
    tree.process(11, V1)
    tree.process(12, V2)
    (tree.proc / "12" / "status").write_text(
        "Name:\tpython\nUid:\t2001\t2001\t2001\t2001\nGid:\t5\t5\t5\t5\n"
    )
    tree.process(13, "0::/system.slice/sshd.service\n")
    snap = snapshot(
        gpu(0, (proc(10, 4, 0.5), proc(11, 2, 0.25)), used=8 * GIB),
        gpu(1, (proc(12, 3, 0.5), proc(13, 1, 0.125)), used=5 * GIB),
    )
    return tree, snap


def attribute(tmp_path: Path, tree: HostTree, snap: Snapshot) -> tuple[Attributor, Attribution]:
    attributor = Attributor(AttributionSettings.of(settings(tmp_path, tree)), Telemetry())
    attributor.refresh_now()
    return attributor, attributor.attribute(snap)


def test_slurm_jobs_are_a_breakdown_of_the_unattributed_share_with_their_owners(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree, snap = slurm_host(tmp_path)
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n# comment\nalice:x:1000:1000::/home/alice:/bin/sh\n")
    attributor, first = attribute(tmp_path, tree, snap)
    try:
        passwd.write_text("alice:x:1000:1000::/home/alice:/bin/sh\nbob:x:2001:5::/home/bob:/bin/sh\n")
        os.utime(passwd, (1, 1))  # a changed file is read again
        attributor.refresh_now()
        second = attributor.attribute(snap)
        passwd.unlink()
        passwd.mkdir()  # there, but not a readable file
        with caplog.at_level(logging.WARNING, logger="falcon_gpu"):
            attributor.refresh_now()
        third = attributor.attribute(snap)
    finally:
        attributor.close()
    uuids = [d.uuid for d in snap.devices]
    rows = [
        (
            j.job,
            j.step,
            j.uid,
            j.user,
            uuids.index(j.gpu_uuid),
            j.memory_used_bytes,
            j.utilization_ratio,
            j.processes,
        )
        for j in first.slurm_jobs
    ]
    assert rows == [
        ("4242", "0", 1000, "alice", 0, 6 * GIB, 0.75, 2),
        ("77", "batch", 2001, None, 1, 3 * GIB, 0.5, 1),  # no passwd entry for 2001 yet
    ]
    assert first.sources_ok == {"cgroup": True, "passwd": True}
    assert [u.memory_used_bytes for u in first.unattributed] == [8 * GIB, 5 * GIB]  # still unattributed
    assert [j.user for j in second.slurm_jobs] == ["alice", "bob"]
    assert third.sources_ok["passwd"] is False
    assert [r.getMessage() for r in caplog.records if "passwd_file" in r.getMessage()] == [
        f"cannot read {passwd} (Is a directory): mount the host's /etc/passwd read-only or set "
        "passwd_file; Slurm jobs keep their uid but lose the user label meanwhile"
    ]
    assert [j.user for j in third.slurm_jobs] == ["alice", "bob"]  # last names kept


def test_without_a_passwd_file_jobs_keep_their_uid_and_no_source_is_reported(tmp_path: Path) -> None:
    tree, snap = slurm_host(tmp_path)
    attributor, result = attribute(tmp_path, tree, snap)
    try:
        rows = {r[0]: r for r in attributor.diagnose(snap)}
    finally:
        attributor.close()
    assert result.sources_ok == {"cgroup": True}
    assert [(j.job, j.uid, j.user) for j in result.slurm_jobs] == [("4242", 1000, None), ("77", 2001, None)]
    assert rows["user names (passwd)"][1] == "SKIP"


def cycle_of(snap: Snapshot, att: Attribution) -> CycleData:
    return CycleData(
        node="n1", step=60, snapshot=snap, attribution=att, health={}, telemetry=Telemetry().view()
    )


def test_open_falcon_items_sum_a_jobs_steps_per_gpu(tmp_path: Path) -> None:
    tree = HostTree(tmp_path)
    tree.process(10, "4:memory:/slurm/uid_7/job_5/step_0/task_0\n")
    tree.process(11, "4:memory:/slurm/uid_7/job_5/step_1/task_0\n")
    snap = snapshot(gpu(3, (proc(10, 2, 0.25), proc(11, 1, 0.125))))
    attributor, att = attribute(tmp_path, tree, snap)
    attributor.close()
    items = {
        (i.metric, i.tags): i.value for i in openfalcon.render(cycle_of(snap, att)) if "Slurm" in i.metric
    }
    assert items == {
        ("SlurmJobGPUUtils", "GpuId=3,slurm_job=5"): 37.5,
        ("SlurmJobFBUsed", "GpuId=3,slurm_job=5"): 3072.0,
    }


def test_dcgm_device_series_carry_hpc_job_only_for_a_gpu_of_one_job(tmp_path: Path) -> None:
    tree = HostTree(tmp_path)
    tree.process(10, "4:memory:/slurm/uid_7/job_5/step_0/task_0\n")
    tree.process(11, "4:memory:/slurm/uid_7/job_5/step_1/task_0\n")  # same job, another step
    tree.process(12, "4:memory:/slurm/uid_7/job_6/step_0/task_0\n")
    tree.process(13, "4:memory:/slurm/uid_8/job_7/step_0/task_0\n")
    snap = snapshot(
        gpu(0, (proc(10, 1, 0.1), proc(11, 1, 0.1))), gpu(1, (proc(12, 1, 0.1), proc(13, 1, 0.1)))
    )
    attributor, att = attribute(tmp_path, tree, snap)
    attributor.close()
    batch = dcgm.render(cycle_of(snap, att))
    (used,) = [f for f in batch.families if f.name == "DCGM_FI_DEV_FB_USED"]
    assert {dict(s.labels)["gpu"]: dict(s.labels).get("hpc_job") for s in used.series} == {
        "0": "5",
        "1": None,
    }


@pytest.mark.servers
def test_slurm_jobs_next_to_a_pod_through_a_real_prometheus(
    prometheus: ManagedServer, tmp_path: Path
) -> None:
    gpu0 = "GPU-00000000-aaaa-bbbb-cccc-000000000000"
    uid, cid = pod_uid(1), container_id(1)
    host = train_pod_host(
        gpu0,
        uid,
        cid,
        {
            "5151": {"cgroup": "12:memory:/slurm/uid_1000/job_310/step_0/task_0\n0::/\n"},
            "6161": {
                "cgroup": "0::/system.slice/slurmstepd.scope/job_311/step_batch/user/task_0\n",
                "uid": 1001,
            },
        },
        users=[{"name": "alice", "uid": 1000}],
    )

    def process(pid: int, gib: int, sm: int) -> dict[str, object]:
        return {
            "pid": pid,
            "name": "python",
            "type": "compute",
            "used_memory_bytes": gib * GIB,
            "sm_util_percent": sm,
        }

    gpus = [
        {
            "uuid": gpu0,
            "name": "NVIDIA H100 80GB HBM3",
            "memory_total_bytes": 80 * GIB,
            "memory_used_bytes": 20 * GIB,
            "energy_joules": [1000, 1900],
            "processes": [process(4242, 10, 40), process(5151, 5, 30), process(6161, 4, 20)],
        }
    ]
    scenario = tmp_path / "slurm.json"
    scenario.write_text(
        json.dumps({"driver_version": "570.86.15", "cuda_version": "12.8", "gpus": gpus, "host": host})
    )
    run_once_into(prometheus, scenario, "slurm-node")

    def values(metric: str) -> dict[str, float]:
        found = prom_query(prometheus, f'{metric}{{node="slurm-node"}}')
        return {r["metric"].get("slurm_job", r["metric"].get("pod", "")): float(r["value"][1]) for r in found}

    info = prom_query(prometheus, 'falcon_gpu_slurm_job_info{node="slurm-node"}')
    assert sorted(
        (r["metric"]["slurm_job"], r["metric"]["slurm_step"], r["metric"]["uid"], r["metric"].get("user"))
        for r in info
    ) == [("310", "0", "1000", "alice"), ("311", "batch", "1001", None)]
    assert values("falcon_gpu_slurm_job_memory_used_bytes") == {"310": 5 * GIB, "311": 4 * GIB}
    assert values("falcon_gpu_slurm_job_utilization_ratio") == {"310": 0.3, "311": 0.2}
    assert values("falcon_gpu_slurm_job_processes") == {"310": 1, "311": 1}
    assert values("falcon_gpu_pod_memory_used_bytes") == {"train-0": 10 * GIB}
    assert values("falcon_gpu_unattributed_memory_used_bytes") == {"": 10 * GIB}  # 20 - the pod's 10


def test_a_slurm_job_gets_its_energy_share_inside_the_unattributed() -> None:
    from falcon_gpu.attribution.chain import Chain
    from falcon_gpu.attribution.joiner import Joiner

    joiner = Joiner()
    slurm = {10: SlurmStep("5", "0", 7), 11: None}
    for energy in (1000.0, 1100.0):  # 100 J used: 0.6 / (0.6 + 0.2) to the job
        snap = snapshot(gpu(0, (proc(10, 1, 0.6), proc(11, 1, 0.2)), energy=energy))
        result = joiner.join(snap, {10: None, 11: None}, Chain(), 0.0, None, None, slurm)
    (job,) = result.attribution.slurm_jobs
    (rest,) = result.attribution.unattributed
    assert (job.job, job.uid, job.processes, job.energy_joules_total) == ("5", 7, 1, pytest.approx(75.0))
    assert (rest.processes, rest.energy_joules_total) == (2, pytest.approx(100.0))  # the job's included


def test_a_jobs_name_is_read_once_from_its_environment_and_forgotten_with_the_job(tmp_path: Path) -> None:
    tree, snap = slurm_host(tmp_path)
    environ = tree.proc / "10" / "environ"
    environ.write_bytes(b"PATH=/usr/bin\0SLURM_JOB_NAME=train-llm\0SLURM_JOB_ID=4242\0")
    (tree.proc / "12" / "environ").write_bytes(b"PATH=/usr/bin\0")  # no job name: the advice uses the id
    attributor, first = attribute(tmp_path, tree, snap)
    try:
        environ.unlink()  # read in the first cycle: not read again while the job runs
        second = attributor.attribute(snap)
        reads = attributor.slurm_names.reads
        without_4242 = snapshot(gpu(0, (), used=GIB), gpu(1, (proc(12, 3, 0.5),), used=5 * GIB))
        attributor.attribute(without_4242)  # job 4242 gone: its name is forgotten
        back = attributor.attribute(snap)  # and read again (the file is gone now)
    finally:
        attributor.close()
    assert [(j.job, j.name) for j in first.slurm_jobs] == [("4242", "train-llm"), ("77", None)]
    assert [(j.job, j.name) for j in second.slurm_jobs] == [("4242", "train-llm"), ("77", None)]
    assert reads == 2  # one per job, not one per cycle
    assert attributor.slurm_names.reads == 3
    assert [(j.job, j.name) for j in back.slurm_jobs] == [("4242", None), ("77", None)]


def test_a_hostile_jobs_environment_costs_a_bounded_read_and_a_bounded_label(tmp_path: Path) -> None:
    """The job's user writes its environment: a 10,000-character name is cut to the label limit, and
    a name past the first MiB of a huge environment is not read at all (the job is then its id)."""
    from falcon_gpu.attribution.slurm_names import MAX_ENVIRON_BYTES, MAX_NAME, read_job_name

    (tmp_path / "41").mkdir()
    (tmp_path / "41" / "environ").write_bytes(b"HOME=/\0SLURM_JOB_NAME=" + b"x" * 10_000 + b"\0")
    assert read_job_name(tmp_path, 41) == "x" * MAX_NAME
    (tmp_path / "42").mkdir()
    padding = b"PAD=" + b"p" * MAX_ENVIRON_BYTES + b"\0"
    (tmp_path / "42" / "environ").write_bytes(padding + b"SLURM_JOB_NAME=hidden\0")
    assert read_job_name(tmp_path, 42) is None
