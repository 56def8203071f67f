"""Every cgroup layout the issue lists -> the pod UID and container ID it names."""

from __future__ import annotations

from pathlib import Path

import pytest

from falcon_gpu.attribution.cgroup import CgroupIdentity, parse_cgroup
from falcon_gpu.attribution.pid_cache import PidCache

UID = "7c2f1a9e-4b3d-4e5f-8a6b-1c2d3e4f5a6b"
UID_ = UID.replace("-", "_")
STATIC = "5b4a3c2d1e0f9a8b7c6d5e4f3a2b1c0d"
CID = "3f1e5d7c9b2a4f6e8d0c1b3a5f7e9d2c4b6a8f0e1d3c5b7a9f2e4d6c8b0a1f3e"
CONMON = "aa" * 32

LAYOUTS: dict[str, tuple[str, CgroupIdentity | None]] = {
    "v2 systemd containerd burstable": (
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
        f"cri-containerd-{CID}.scope\n",
        CgroupIdentity(UID, CID),
    ),
    "v2 systemd containerd besteffort": (
        f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/"
        f"cri-containerd-{CID}.scope\n",
        CgroupIdentity(UID, CID),
    ),
    "v2 systemd guaranteed (no QoS level)": (
        f"0::/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{CID}.scope\n",
        CgroupIdentity(UID, CID),
    ),
    "v2 cgroupfs containerd besteffort": (
        f"0::/kubepods/besteffort/pod{UID}/{CID}\n",
        CgroupIdentity(UID, CID),
    ),
    "v2 cgroupfs guaranteed": (
        f"0::/kubepods/pod{UID}/{CID}\n",
        CgroupIdentity(UID, CID),
    ),
    "v2 systemd cri-o": (
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-{CID}.scope\n",
        CgroupIdentity(UID, CID),
    ),
    "v2 systemd cri-o under crun (/container)": (
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
        f"crio-{CID}.scope/container\n",
        CgroupIdentity(UID, CID),
    ),
    "v2 cri-o conmon is not the workload": (
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
        f"crio-conmon-{CONMON}.scope\n",
        None,
    ),
    "v2 cgroupfs cri-o": (
        f"0::/kubepods/burstable/pod{UID}/crio-{CID}\n",
        CgroupIdentity(UID, CID),
    ),
    "v2 systemd docker / cri-dockerd": (
        f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/docker-{CID}.scope\n",
        CgroupIdentity(UID, CID),
    ),
    "v2 kind: kubelet --cgroup-root prefix": (
        f"0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
        f"kubelet-kubepods-besteffort-pod{UID_}.slice/cri-containerd-{CID}.scope\n",
        CgroupIdentity(UID, CID),
    ),
    "v2 private cgroup namespace (relative path)": (
        f"0::/../../kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{CID}.scope\n",
        CgroupIdentity(UID, CID),
    ),
    "v2 static pod (32-hex UID), systemd": (
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{STATIC}.slice/"
        f"cri-containerd-{CID}.scope\n",
        CgroupIdentity(STATIC, CID),
    ),
    "v2 static pod (32-hex UID), cgroupfs": (
        f"0::/kubepods/burstable/pod{STATIC}/{CID}\n",
        CgroupIdentity(STATIC, CID),
    ),
    "v1 cgroupfs docker, one line per controller": (
        f"12:pids:/kubepods/besteffort/pod{UID}/{CID}\n"
        f"11:memory:/kubepods/besteffort/pod{UID}/{CID}\n"
        f"3:cpu,cpuacct:/kubepods/besteffort/pod{UID}/{CID}\n"
        f"1:name=systemd:/kubepods/besteffort/pod{UID}/{CID}\n",
        CgroupIdentity(UID, CID),
    ),
    "v1 systemd containerd": (
        f"11:devices:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
        f"cri-containerd-{CID}.scope\n"
        f"1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
        f"cri-containerd-{CID}.scope\n",
        CgroupIdentity(UID, CID),
    ),
    "v1 systemd cri-o": (
        f"11:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
        f"crio-{CID}.scope\n"
        f"1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
        f"crio-{CID}.scope\n",
        CgroupIdentity(UID, CID),
    ),
    "v1 systemd docker / cri-dockerd": (
        f"11:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/"
        f"docker-{CID}.scope\n",
        CgroupIdentity(UID, CID),
    ),
    "hybrid: 0:: names no pod, v1 lines do": (
        f"12:memory:/kubepods/burstable/pod{UID}/{CID}\n1:name=systemd:/kubepods/burstable/pod{UID}/{CID}\n0::/\n",
        CgroupIdentity(UID, CID),
    ),
    "pod-level process (no container segment)": (
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice\n",
        CgroupIdentity(UID, None),
    ),
    "host daemon (systemd service)": ("0::/system.slice/nvidia-dcgm.service\n", None),
    "host user session": ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
    "plain docker outside kubernetes": (f"0::/system.slice/docker-{CID}.scope\n", None),
    "root cgroup": ("0::/\n", None),
    "empty / garbage": ("garbage without colons\n\n", None),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_layout(name: str) -> None:
    text, expected = LAYOUTS[name]
    assert parse_cgroup(text) == expected


def test_upper_case_ids_are_normalised() -> None:
    text = f"0::/kubepods/besteffort/pod{UID.upper()}/{CID.upper()}\n"
    assert parse_cgroup(text) == CgroupIdentity(UID, CID)


def test_read_cgroup_dead_pid_is_unattributed_not_an_error(tmp_path: Path) -> None:
    cache = PidCache(tmp_path, ttl=0)  # every lookup reads the file again
    assert cache.lookup(4242) is None and not cache.was_readable(4242)
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(LAYOUTS["v2 cgroupfs guaranteed"][0])
    assert cache.lookup(4242) == CgroupIdentity(UID, CID)


def test_pid_cache_reads_once_and_evicts_unreported(tmp_path: Path) -> None:
    for pid in (1, 2):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cgroup").write_text(LAYOUTS["v2 cgroupfs guaranteed"][0])
    now = [0.0]
    cache = PidCache(tmp_path, ttl=60, clock=lambda: now[0])
    assert cache.lookup(1) == CgroupIdentity(UID, CID)
    assert cache.lookup(1) == CgroupIdentity(UID, CID)
    assert cache.lookup(2) is not None
    assert cache.lookup(3) is None  # not visible: cached as "no pod"
    assert cache.reads == 3
    assert cache.was_readable(1) and not cache.was_readable(3)
    cache.retain([1])
    assert len(cache) == 1
    now[0] = 61.0  # past the TTL: a reused PID would be re-read
    (tmp_path / "1" / "cgroup").write_text("0::/system.slice/sshd.service\n")
    assert cache.lookup(1) is None
    assert cache.reads == 4


def test_pid_cache_is_bounded(tmp_path: Path) -> None:
    cache = PidCache(tmp_path, max_entries=10)
    for pid in range(100):
        cache.lookup(pid)
    assert len(cache) == 10
