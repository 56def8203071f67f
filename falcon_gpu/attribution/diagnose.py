"""``doctor`` rows for attribution: can this agent see what it needs to name GPU users?

Each row is a :data:`~falcon_gpu.checks.Row`. The checks call the readers
directly (blocking is fine: doctor runs once, not in a cycle) and join with a
throwaway :class:`Joiner`, so no agent state is touched. The kubelet and log-dir
rows follow the ``kubernetes`` setting: SKIP where Kubernetes is not expected
(``off``, or ``auto`` on a host with neither), FAIL when expected and broken.
"""

from __future__ import annotations

import time

from falcon_gpu.attribution.joiner import Joiner, Lookups
from falcon_gpu.attribution.kube_api import KubeApiError, PodLabels, PodLabelSource
from falcon_gpu.attribution.logdirs import LogDirScanner, NameMaps
from falcon_gpu.attribution.pid_cache import PidCache
from falcon_gpu.attribution.podresources.client import (
    KubeletAllocations,
    PodResourcesClient,
    PodResourcesError,
)
from falcon_gpu.attribution.presence import kubernetes_expected
from falcon_gpu.checks import FAIL, OK, SKIP, Row, verdict
from falcon_gpu.model.snapshot import Snapshot
from falcon_gpu.settings import Settings


def diagnose_rows(
    settings: Settings,
    snapshot: Snapshot,
    pids: PidCache,
    kubelet: PodResourcesClient,
    label_source: PodLabelSource | None,
) -> list[Row]:
    from falcon_gpu.attribution.attributor import snapshot_pids

    rows: list[Row] = []
    all_pids = sorted(set(snapshot_pids(snapshot)))
    visible = [pid for pid in all_pids if pids.visible(pid)]
    if not all_pids:
        rows.append(("host PIDs visible", SKIP, "no GPU processes right now; nothing to check"))
    elif len(visible) == len(all_pids):
        detail = f"all {len(all_pids)} NVML PIDs exist under {settings.proc_root}"
        rows.append(("host PIDs visible", OK, detail))
    else:
        rows.append(
            (
                "host PIDs visible",
                FAIL,
                f"{len(visible)} of {len(all_pids)} NVML PIDs exist under {settings.proc_root}: "
                "run the agent with hostPID: true (or mount the host's /proc and set proc_root)",
            )
        )

    allocations: KubeletAllocations | None = None
    names = NameMaps()
    if kubernetes_expected(settings):
        allocations, names = _kubernetes_rows(settings, kubelet, rows)
    else:
        why = "kubernetes = off" if settings.kubernetes == "off" else "no kubelet socket or pod log dirs here"
        rows.append(("kubelet socket", SKIP, f"{why}; not a Kubernetes node"))
        rows.append(("log dirs", SKIP, f"{why}; not a Kubernetes node"))
    labels = _label_rows(settings, label_source, rows)
    identities = {pid: pids.lookup(pid) for pid in all_pids}
    result = Joiner().join(snapshot, identities, Lookups.build(names, allocations, labels), time.monotonic())
    if not all_pids:
        rows.append(("GPU processes attributed", SKIP, "no GPU processes right now; nothing to attribute"))
        return rows
    outside = len(all_pids) - result.in_pod
    ok = result.attributed == result.in_pod
    detail = (
        f"{result.attributed} of {result.in_pod} GPU processes in pods attributed to a container; "
        f"{outside} in no pod"
    )
    if not ok:
        detail += " (the unnamed ones have no entry in the log dirs yet)"
    rows.append(("GPU processes attributed", verdict(ok), detail))
    return rows


def _kubernetes_rows(
    settings: Settings, kubelet: PodResourcesClient, rows: list[Row]
) -> tuple[KubeletAllocations | None, NameMaps]:
    allocations: KubeletAllocations | None = None
    try:
        allocations = kubelet.fetch()
        rows.append(
            (
                "kubelet socket",
                OK,
                f"{settings.kubelet_socket} answers; {len(allocations.allocations)} GPU allocations, "
                f"{len(allocations.allocatable)} allocatable GPU devices",
            )
        )
    except PodResourcesError as exc:
        rows.append(("kubelet socket", FAIL, str(exc)))

    names = NameMaps()
    try:
        names = LogDirScanner(settings.log_root).scan()
        rows.append(
            (
                "log dirs",
                OK,
                f"{len(names.pods)} pods, {len(names.containers)} containers under {settings.log_root}",
            )
        )
    except OSError as exc:
        rows.append(
            (
                "log dirs",
                FAIL,
                f"cannot list {settings.log_root}/pods and {settings.log_root}/containers "
                f"({exc.strerror}): mount them read-only",
            )
        )

    return allocations, names


def _label_rows(settings: Settings, label_source: PodLabelSource | None, rows: list[Row]) -> PodLabels | None:
    labels: PodLabels | None = None
    if settings.pod_labels:
        if label_source is None:
            rows.append(
                ("pod labels (Kubernetes API)", FAIL, "pod_labels is set but not running in a cluster")
            )
        else:
            try:
                labels = label_source.fetch()
                found = len(labels.by_uid)
                detail = f"{found} pods on node {settings.node}"
                if not found:  # the usual cause: node defaults to the host name, not the node name
                    detail += "; none: set NODE_NAME from spec.nodeName (downward API) or set node"
                rows.append(("pod labels (Kubernetes API)", verdict(found > 0), detail))
            except KubeApiError as exc:
                rows.append(("pod labels (Kubernetes API)", FAIL, str(exc)))

    return labels
