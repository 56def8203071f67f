"""The settings attribution reads, and nothing else: a frozen copy taken from :class:`Settings`.

The attributor and its sources see host paths, the ``kubernetes`` switch and the
label allow-list, never the sinks or the schema, so a source can be built and
tested from a handful of values and a new setting of another stage cannot change
attribution by accident. :meth:`AttributionSettings.of` is the one place that maps
agent settings to attribution settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

from falcon_gpu.model.attribution import DEFAULT_JOB_LABELS

if TYPE_CHECKING:  # a type here; its module (an HTTP client) is imported only where labels are read
    from falcon_gpu.attribution.kube_api import KubeApiConfig
    from falcon_gpu.settings import Settings
    from falcon_gpu.settings_resolved import ResolvedSettings

Kubernetes = Literal["auto", "on", "off"]


class AttributionSettings(msgspec.Struct, frozen=True, gc=False):
    node: str
    interval: float = 30.0
    proc_root: Path = Path("/proc")
    kubelet_socket: Path = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
    log_root: Path = Path("/var/log")
    docker_root: Path = Path("/var/lib/docker")
    """Docker's data root: ``containers/<id>/config.v2.json`` names plain Docker containers."""
    containers_root: Path = Path("/var/lib/containers")
    """Podman's: ``storage/overlay-containers/containers.json`` names its containers."""
    passwd_file: Path = Path("/etc/passwd")
    """The host's passwd: names the uids of Slurm jobs (``user`` label)."""
    kubernetes: Kubernetes = "auto"
    gpu_resources: tuple[str, ...] = ("nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*")
    """kubelet resource names (globs) that count as GPUs."""
    pod_labels: tuple[str, ...] = ()
    job_labels: tuple[str, ...] = DEFAULT_JOB_LABELS
    """Pod labels naming a distributed job: the first one a pod has is its ``job_name``."""
    pod_requests: bool = False
    """Read the containers' GPU quotas from the API server's pod list (requested vs used)."""
    pod_uid: bool = False
    """Add ``pod_uid`` to pod series (cardinality: one more series per pod restart)."""
    process_metrics: bool = False
    kube_api: KubeApiConfig | None = None
    """The API server for ``pod_labels``, ``pod_requests``; None: the in-cluster one, if any."""

    @classmethod
    def of(
        cls, settings: Settings | ResolvedSettings, *, kube_api: KubeApiConfig | None = None
    ) -> AttributionSettings:
        """The attribution part of the agent's settings (``kube_api``: tests point it elsewhere)."""
        return cls(
            node=settings.node,
            interval=settings.interval,
            proc_root=settings.proc_root,
            kubelet_socket=settings.kubelet_socket,
            log_root=settings.log_root,
            docker_root=settings.docker_root,
            containers_root=settings.containers_root,
            passwd_file=settings.passwd_file,
            kubernetes=settings.kubernetes,
            gpu_resources=tuple(settings.gpu_resources),
            pod_labels=tuple(settings.pod_labels),
            job_labels=tuple(settings.job_labels),
            pod_requests=settings.pod_requests,
            pod_uid=settings.pod_uid,
            process_metrics=settings.process_metrics,
            kube_api=kube_api,
        )

    @property
    def refresh_period(self) -> float:
        """How often node-local lookups are refreshed: the interval, clamped to 5 to 30 s."""
        return max(5.0, min(self.interval, 30.0))

    @property
    def retention(self) -> float:
        """How long an idle pod's energy counter is kept (see ledger)."""
        return max(600.0, 3 * self.interval)
