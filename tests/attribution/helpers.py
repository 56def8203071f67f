"""Builders shared by the attribution tests: cgroup lines, host trees, snapshots."""

from __future__ import annotations

import os
import uuid as uuidlib
from pathlib import Path

from falcon_gpu.attribution.chain import Chain
from falcon_gpu.attribution.kube_api import PodLabels
from falcon_gpu.attribution.logdirs import NameMaps
from falcon_gpu.attribution.podresources.client import KubeletAllocations
from falcon_gpu.attribution.source import EMPTY
from falcon_gpu.attribution.sources.kubelet import KubeletView
from falcon_gpu.attribution.sources.logs import NameView
from falcon_gpu.attribution.sources.pod_labels import LabelView
from falcon_gpu.model.snapshot import DeviceReading, MigReading, ProcessReading, Snapshot

GIB = 1 << 30


def pod_uid(n: int) -> str:
    return str(uuidlib.UUID(int=0x1000_0000_0000_4000_8000_0000_0000_0000 + n))


def container_id(n: int) -> str:
    return f"{n:064x}"


def systemd_cgroup(uid: str, cid: str, qos: str = "burstable") -> str:
    u = uid.replace("-", "_")
    return f"0::/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{u}.slice/cri-containerd-{cid}.scope\n"


class HostTree:
    """A proc tree and kubelet log dirs in a temporary directory, like a node's."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.proc = root / "proc"
        self.log = root / "log"
        self.proc.mkdir(parents=True, exist_ok=True)
        (self.log / "pods").mkdir(parents=True, exist_ok=True)
        (self.log / "containers").mkdir(parents=True, exist_ok=True)

    def no_runtimes(self) -> dict[str, Path]:
        """``docker_root``, ``containers_root`` and ``passwd_file`` that do not exist: the test
        machine's own Docker, Podman or users stay out of a test that counts sources."""
        return {
            "docker_root": self.root / "no-docker",
            "containers_root": self.root / "no-containers",
            "passwd_file": self.root / "no-passwd",
        }

    def process(self, pid: int, cgroup: str) -> None:
        d = self.proc / str(pid)
        d.mkdir(exist_ok=True)
        (d / "cgroup").write_text(cgroup)

    def kill(self, pid: int) -> None:
        for f in (self.proc / str(pid)).iterdir():
            f.unlink()
        (self.proc / str(pid)).rmdir()

    def container(self, namespace: str, pod: str, uid: str, container: str, cid: str) -> None:
        pod_dir = self.log / "pods" / f"{namespace}_{pod}_{uid}"
        (pod_dir / container).mkdir(parents=True, exist_ok=True)
        target = pod_dir / container / "0.log"
        target.touch()
        link = self.log / "containers" / f"{pod}_{namespace}_{container}-{cid}.log"
        if not link.is_symlink():
            os.symlink(target, link)

    def remove_pod(self, namespace: str, pod: str, uid: str) -> None:
        for link in (self.log / "containers").iterdir():
            if link.name.startswith(f"{pod}_{namespace}_"):
                link.unlink()
        pod_dir = self.log / "pods" / f"{namespace}_{pod}_{uid}"
        for sub in pod_dir.iterdir():
            for f in sub.iterdir():
                f.unlink()
            sub.rmdir()
        pod_dir.rmdir()


def proc(pid: int, mem_gib: float, sm: float | None, **kw: object) -> ProcessReading:
    return ProcessReading(
        pid=pid,
        name=f"p{pid}",
        used_memory_bytes=int(mem_gib * GIB),
        sm_util_ratio=sm,
        **kw,  # type: ignore[arg-type]
    )


def gpu(
    index: int,
    processes: tuple[ProcessReading, ...] = (),
    energy: float | None = 1000.0,
    mig: tuple[MigReading, ...] = (),
    used: int | None = -1,
) -> DeviceReading:
    """``used``: the device's memory used; by default what its processes (and its MIG
    instances' processes) report, with no driver overhead."""
    if used == -1:
        every = (*processes, *(p for m in mig for p in m.processes))
        used = sum(p.used_memory_bytes or 0 for p in every)
    return DeviceReading(
        index=index,
        uuid=f"GPU-{index:08d}-0000-0000-0000-000000000000",
        name="NVIDIA A100-SXM4-40GB",
        pci_bus_id=f"00000000:{index + 0x10:02X}:00.0",
        energy_joules=energy,
        memory_used_bytes=used,
        processes=processes,
        mig=mig,
        mig_enabled=bool(mig),
    )


def snapshot(*devices: DeviceReading, ts: float = 1.7e9) -> Snapshot:
    return Snapshot(timestamp=ts, nvml_ok=True, devices=tuple(devices))


def chain_of(names: NameMaps, kubelet: KubeletAllocations | None, labels: PodLabels | None) -> Chain:
    """The registry's chain (kubelet, logs, kube_api) over hand-made answers; None: no answer."""
    return Chain(
        (
            EMPTY if kubelet is None else KubeletView(kubelet),
            NameView(names),
            EMPTY if labels is None else LabelView(labels),
        )
    )


def train_pod_host(
    gpu_uuid: str, uid: str, cid: str, proc: dict[str, object], **extra: object
) -> dict[str, object]:
    """A scenario ``host`` with the Kubernetes pod ``ml/train-0`` (container ``main``, PID 4242, whole GPU
    ``gpu_uuid``) beside the other processes in ``proc`` and the other host keys in ``extra``: the node
    the mixed-host tests (plain containers, Slurm jobs) put their strays on."""
    return {
        "proc": {"4242": {"cgroup": systemd_cgroup(uid, cid)}, **proc},
        "pod_resources": [
            {
                "namespace": "ml",
                "name": "train-0",
                "containers": [
                    {
                        "name": "main",
                        "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": [gpu_uuid]}],
                    }
                ],
            }
        ],
        "log_pods": [f"ml_train-0_{uid}"],
        "log_containers": [f"train-0_ml_main-{cid}.log"],
        **extra,
    }
