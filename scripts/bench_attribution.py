#!/usr/bin/env python3
"""Benchmark pod attribution: per-cycle cost (cold and warm) and memory under pod churn.

Targets (issue 3): at most 5 ms median per cycle for 256 GPU processes across
16 GPUs with warm caches; the first (cold) cycle under 100 ms; memory bounded
with 10,000 short-lived pods coming and going.

Times are wall clock and, less disturbed by other work on a shared machine, the CPU time of
the cycle's own thread (``time.thread_time``; the servers' threads are idle during a cycle).

Everything is real except NVML: a proc tree and kubelet log dirs in a temporary
directory, a PodResources gRPC server on a unix socket, the real Attributor.
Snapshots are built directly (the NVML source is benchmarked elsewhere).

    python scripts/bench_attribution.py [--cycles 300] [--churn-pods 10000] [--docker 32] [--podman 16]
        [--slurm 32] [--dra 32] [--json out.json]

The second cycle measure runs every source of the registry: kubelet (device plugins, and for
``--dra`` of the pods DRA claims ``gpu-<minor>`` instead), log dirs, the API server (the
simulator's loopback kube-apiserver listing every pod with a label and HAMi quotas:
``pod_labels`` and ``pod_requests`` on, ``pod_uid`` too), plain containers (``--docker`` of the
processes in Docker, cgroup + config.v2.json; ``--podman`` more in Podman, cgroup +
containers.json) and, for ``--slurm`` more, Slurm job steps (half cgroup v1, half v2 with
``status``) named by passwd.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import tempfile
import time
import tracemalloc
import uuid as uuidlib
from pathlib import Path
from typing import Any

from falcon_gpu.attribution import AttributionSettings, Attributor
from falcon_gpu.attribution.kube_api import KubeApiConfig
from falcon_gpu.attribution.sources.containers import PODMAN_FILE
from falcon_gpu.model.snapshot import DeviceReading, ProcessReading, Snapshot
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.settings import Settings
from falcon_gpu.simulator.node.kube_api_server import KubeApiServer
from falcon_gpu.simulator.node.podresources_server import PodResourcesServer
from falcon_gpu.simulator.scenario.host_model import (
    ApiContainer,
    ApiPod,
    PodResourcesClaim,
    PodResourcesClaimDevice,
    PodResourcesContainer,
    PodResourcesDevice,
    PodResourcesPod,
)

GPUS = 16
PER_GPU = 16
CONCURRENT_PODS = 256


def gpu_uuid(i: int) -> str:
    return f"GPU-{i:08x}-1111-2222-3333-444444444444"


class _ChangingKubelet(PodResourcesServer):
    """A kubelet whose pods come and go: List answers whatever ``pods`` holds now."""

    pods: tuple[PodResourcesPod, ...] = ()

    def state(self) -> tuple[tuple[PodResourcesPod, ...], tuple[PodResourcesDevice, ...]]:
        return self.pods, ()


class Node:
    """A node's files and kubelet: pods can be added and removed while the agent watches."""

    def __init__(self, root: Path, socket: Path) -> None:
        self.proc = root / "proc"
        self.log = root / "log"
        for d in (self.proc, self.log / "pods", self.log / "containers"):
            d.mkdir(parents=True)
        self.pods: dict[int, tuple[str, str, int, int]] = {}  # n -> (uid, cid, pid, gpu)
        self.docker = root / "docker"
        self.podman = root / "containers"
        self.podman_names: list[dict[str, Any]] = []
        self.plain: dict[int, tuple[int, int]] = {}  # n -> (pid, gpu): Docker containers, no pod
        self.dra: set[int] = set()
        """Pods whose GPU comes from a DRA claim (``gpu-<minor>``), not the device plugin."""
        self.server = _ChangingKubelet(socket)
        self.server.start()

    def add_docker(self, n: int, gpu: int) -> None:
        """A plain Docker container (issue 13): docker-<id>.scope and Docker's config.v2.json."""
        cid = f"{n:064x}"
        pid = 200000 + n
        (self.proc / str(pid)).mkdir()
        (self.proc / str(pid) / "cgroup").write_text(f"0::/system.slice/docker-{cid}.scope\n")
        (self.docker / "containers" / cid).mkdir(parents=True)
        (self.docker / "containers" / cid / "config.v2.json").write_text(json.dumps({"Name": f"/box-{n}"}))
        self.plain[n] = (pid, gpu)

    def add_podman(self, n: int, gpu: int) -> None:
        """A Podman container: libpod-<id>.scope (crun) and an entry of containers.json."""
        cid = f"{n:064x}"
        pid = 250000 + n
        (self.proc / str(pid)).mkdir()
        (self.proc / str(pid) / "cgroup").write_text(f"0::/machine.slice/libpod-{cid}.scope/container\n")
        self.podman_names.append({"id": cid, "names": [f"pod-box-{n}"]})
        listing = self.podman / PODMAN_FILE
        listing.parent.mkdir(parents=True, exist_ok=True)
        listing.write_text(json.dumps(self.podman_names))
        self.plain[n] = (pid, gpu)

    def api_pods(self) -> list[ApiPod]:
        """Every pod as the API server lists it: a label, and HAMi quotas on its container."""
        limits = (("nvidia.com/gpu", "1"), ("nvidia.com/gpumem", "4096"), ("nvidia.com/gpucores", "25"))
        return [
            ApiPod("bench", f"job-{n}", uid, (("team", f"t{n % 8}"),), (ApiContainer("main", limits),))
            for n, (uid, _, _, _) in self.pods.items()
        ]

    def add_slurm(self, n: int, gpu: int) -> None:
        """A Slurm job step (issue 13): v1 path with the uid for even ``n``, v2 with ``status``."""
        pid = 300000 + n
        d = self.proc / str(pid)
        d.mkdir()
        if n % 2:
            (d / "cgroup").write_text(f"0::/system.slice/slurmstepd.scope/job_{n}/step_0/user/task_0\n")
            (d / "status").write_text(
                f"Name:\tpython\nUid:\t{1000 + n}\t{1000 + n}\t{1000 + n}\t{1000 + n}\n"
            )
        else:
            (d / "cgroup").write_text(f"4:memory:/slurm/uid_{1000 + n}/job_{n}/step_0/task_0\n0::/\n")
        self.plain[n] = (pid, gpu)

    def add(self, n: int, gpu: int) -> None:
        uid = str(uuidlib.UUID(int=(1 << 100) + n))
        cid = f"{n:064x}"
        pid = 100000 + n
        d = self.proc / str(pid)
        d.mkdir()
        u = uid.replace("-", "_")
        (d / "cgroup").write_text(
            f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/"
            f"cri-containerd-{cid}.scope\n"
        )
        pod_dir = self.log / "pods" / f"bench_job-{n}_{uid}" / "main"
        pod_dir.mkdir(parents=True)
        (pod_dir / "0.log").touch()
        os.symlink(pod_dir / "0.log", self.log / "containers" / f"job-{n}_bench_main-{cid}.log")
        self.pods[n] = (uid, cid, pid, gpu)

    def remove(self, n: int) -> None:
        uid, cid, pid, _ = self.pods.pop(n)
        (self.proc / str(pid) / "cgroup").unlink()
        (self.proc / str(pid)).rmdir()
        (self.log / "containers" / f"job-{n}_bench_main-{cid}.log").unlink()
        pod_dir = self.log / "pods" / f"bench_job-{n}_{uid}"
        (pod_dir / "main" / "0.log").unlink()
        (pod_dir / "main").rmdir()
        pod_dir.rmdir()

    def _container(self, n: int, gpu: int) -> PodResourcesContainer:
        if n in self.dra:
            device = PodResourcesClaimDevice("gpu.nvidia.com", "bench", f"gpu-{gpu}")
            return PodResourcesContainer("main", (), (PodResourcesClaim(f"claim-{n}", "bench", (device,)),))
        shared = PodResourcesDevice("nvidia.com/gpu.shared", (f"{gpu_uuid(gpu)}::{n % 4}",))
        return PodResourcesContainer("main", (shared,))

    def publish(self) -> None:
        self.server.pods = tuple(
            PodResourcesPod("bench", f"job-{n}", (self._container(n, gpu),))
            for n, (_, _, _, gpu) in self.pods.items()
        )

    def snapshot(self, cycle: int) -> Snapshot:
        by_gpu: dict[int, list[ProcessReading]] = {g: [] for g in range(GPUS)}
        owners = [(n, pid, gpu) for n, (_, _, pid, gpu) in self.pods.items()]
        for n, pid, gpu in owners + [(n, pid, gpu) for n, (pid, gpu) in self.plain.items()]:
            memory = (n % 7 + 1) << 28
            by_gpu[gpu].append(
                ProcessReading(pid=pid, name="python", used_memory_bytes=memory, sm_util_ratio=0.05)
            )
        devices = tuple(
            DeviceReading(
                index=g,
                uuid=gpu_uuid(g),
                name="NVIDIA H100 80GB HBM3",
                pci_bus_id=f"00000000:{g:02X}:00.0",
                energy_joules=1000.0 * cycle + g,
                processes=tuple(by_gpu[g]),
            )
            for g in range(GPUS)
        )
        return Snapshot(timestamp=1.7e9 + 30 * cycle, nvml_ok=True, devices=devices)

    def close(self) -> None:
        self.server.stop()


def bench_cycles(
    cycles: int, docker: int = 0, slurm: int = 0, podman: int = 0, dra: int = 0, api: bool = False
) -> dict[str, Any]:
    """``docker``/``podman``: that many of the processes run in plain Docker/Podman containers
    instead of pods, so the ``containers`` source and the plain-container breakdown are measured
    too; ``slurm``: that many more in Slurm job steps, with the ``passwd`` source on; ``dra``: that
    many of the pods hold their GPU through a DRA claim; ``api``: the ``kube_api`` source on (labels,
    quotas and UIDs of every pod from a loopback API server)."""
    with tempfile.TemporaryDirectory(prefix="fgpu-bench-") as tmp:
        node = Node(Path(tmp), Path(tmp) / "k.sock")
        plain = [(node.add_docker, docker), (node.add_podman, podman), (node.add_slurm, slurm)]
        kinds = [add for add, count in plain for _ in range(count)]
        for n in range(GPUS * PER_GPU):
            (kinds[n] if n < len(kinds) else node.add)(n, n % GPUS)
        node.dra = set(sorted(node.pods)[:dra])
        passwd = Path(tmp) / "passwd"
        if slurm:
            passwd.write_text("".join(f"u{n}:x:{1000 + n}:100::/:/bin/sh\n" for n in range(GPUS * PER_GPU)))
        node.publish()
        api_server = KubeApiServer(node.api_pods(), "bench", "bench-token") if api else None
        kube_api = None
        if api_server is not None:
            (Path(tmp) / "token").write_text("bench-token\n")
            kube_api = KubeApiConfig(api_server.start(), Path(tmp) / "token", None)
        now = [0.0]
        settings = Settings(
            proc_root=node.proc,
            log_root=node.log,
            kubelet_socket=Path(tmp) / "k.sock",
            docker_root=node.docker,
            containers_root=node.podman,
            passwd_file=passwd,
            node="bench",
            pod_labels=["team"] if api else [],
            pod_requests=api,
            pod_uid=api,
        )
        attributor = Attributor(
            AttributionSettings.of(settings, kube_api=kube_api), Telemetry(), clock=lambda: now[0]
        )
        t0 = time.perf_counter()
        attributor.refresh_now()
        refresh_ms = (time.perf_counter() - t0) * 1e3
        snap = node.snapshot(0)
        t0, c0 = time.perf_counter(), time.thread_time()
        first = attributor.attribute(snap)
        cold_ms, cold_cpu_ms = (time.perf_counter() - t0) * 1e3, (time.thread_time() - c0) * 1e3
        pods = GPUS * PER_GPU - docker - podman - slurm
        assert sum(p.processes for p in first.pods) == pods, "every pod process attributed"
        assert all(p.allocated for p in first.pods), "every pod's allocation mapped (DRA claims too)"
        assert len([p for p in first.pods if p.resource == "dra:gpu.nvidia.com"]) == dra, "DRA claims"
        names = sorted(c.name.split("-")[0] for c in first.containers)
        assert names == ["box"] * docker + ["pod"] * podman, "every Docker and Podman container named"
        assert len([j for j in first.slurm_jobs if j.user]) == slurm, "every Slurm job and its user found"
        if api:
            assert all(p.container.requested_compute_ratio == 0.25 for p in first.pods), "every quota"
            assert all(dict(p.container.labels).get("label_team") for p in first.pods), "every label"
        warm: list[float] = []
        warm_cpu: list[float] = []
        for cycle in range(1, cycles + 1):
            now[0] = cycle * 30.0
            snap = node.snapshot(cycle)
            t0, c0 = time.perf_counter(), time.thread_time()
            attributor.attribute(snap)
            warm.append((time.perf_counter() - t0) * 1e3)
            warm_cpu.append((time.thread_time() - c0) * 1e3)
        attributor.close()
        node.close()
        if api_server is not None:
            api_server.stop()
    warm.sort()
    return {
        "processes": GPUS * PER_GPU,
        "docker_containers": docker,
        "podman_containers": podman,
        "slurm_jobs": slurm,
        "dra_pods": dra,
        "kube_api": api,
        "gpus": GPUS,
        "refresh_now_ms": round(refresh_ms, 2),
        "cold_cycle_ms": round(cold_ms, 2),
        "warm_median_ms": round(statistics.median(warm), 3),
        "warm_p95_ms": round(warm[int(len(warm) * 0.95)], 3),
        "warm_max_ms": round(warm[-1], 3),
        "cold_cycle_cpu_ms": round(cold_cpu_ms, 2),
        "warm_cpu_median_ms": round(statistics.median(warm_cpu), 3),
    }


def bench_churn(total_pods: int, per_step: int = 16) -> dict[str, Any]:
    """Pods come and go ``per_step`` at a time, ``CONCURRENT_PODS`` alive; traced memory per 1,000 pods."""
    curve: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory(prefix="fgpu-churn-") as tmp:
        node = Node(Path(tmp), Path(tmp) / "k.sock")
        now = [0.0]
        settings = Settings(
            proc_root=node.proc, log_root=node.log, kubelet_socket=Path(tmp) / "k.sock", node="bench"
        )
        attributor = Attributor(AttributionSettings.of(settings), Telemetry(), clock=lambda: now[0])
        started = 0
        for n in range(CONCURRENT_PODS):
            node.add(n, n % GPUS)
        started = CONCURRENT_PODS
        gc.collect()
        tracemalloc.start()
        step = 0
        next_mark = 0
        while started < total_pods:
            for n in sorted(node.pods)[:per_step]:
                node.remove(n)
            for n in range(started, started + per_step):
                node.add(n, n % GPUS)
            started += per_step
            node.publish()
            step += 1
            now[0] = step * 30.0
            attributor.refresh_now()  # what the background refresher does on its period
            attributor.attribute(node.snapshot(step))
            if started >= next_mark:
                gc.collect()
                curve.append((started, tracemalloc.get_traced_memory()[0] / 1024))
                next_mark += 1000
        attributor.close()
        node.close()
        tracemalloc.stop()
    return {"pods_started": started, "alive": CONCURRENT_PODS, "traced_kib_by_pods_started": curve}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--churn-pods", type=int, default=10000)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--docker", type=int, default=32, help="processes in plain Docker containers")
    parser.add_argument("--podman", type=int, default=16, help="processes in Podman containers")
    parser.add_argument("--slurm", type=int, default=32, help="processes in Slurm job steps")
    parser.add_argument("--dra", type=int, default=32, help="pods holding their GPU through a DRA claim")
    args = parser.parse_args()
    cycles = bench_cycles(args.cycles)
    print("cycle cost:", json.dumps(cycles))
    every = bench_cycles(
        args.cycles, docker=args.docker, slurm=args.slurm, podman=args.podman, dra=args.dra, api=True
    )
    print("cycle cost, every source on:", json.dumps(every))
    churn = bench_churn(args.churn_pods)
    print(f"churn: {churn['pods_started']} pods started, {churn['alive']} alive at a time")
    for pods, kib in churn["traced_kib_by_pods_started"]:
        print(f"  {pods:>6} pods started: {kib:9.1f} KiB traced")
    if args.json:
        args.json.write_text(json.dumps({"cycles": cycles, "every_source": every, "churn": churn}, indent=2))


if __name__ == "__main__":
    main()
