"""Source ``logs``: pod and container names from the kubelet's log directories (no API access).

Answers by cgroup identity: a container ID names its namespace, pod and
container; a pod UID names its pod. While the directories cannot be listed, the
last good maps are kept (new pods stay unnamed meanwhile).
"""

from __future__ import annotations

from falcon_gpu.attribution.cgroup import CgroupIdentity
from falcon_gpu.attribution.ledger import ContainerKey
from falcon_gpu.attribution.logdirs import LogDirScanner, NameMaps
from falcon_gpu.attribution.presence import kubernetes_expected, not_kubernetes_reason
from falcon_gpu.attribution.registry import MISS_REFRESH_GAP
from falcon_gpu.attribution.settings import AttributionSettings
from falcon_gpu.attribution.source import EMPTY, PodKey, SourceContext, SourceError, SourceView
from falcon_gpu.checks import FAIL, OK, SKIP, Row


class NameView(SourceView):
    def __init__(self, names: NameMaps) -> None:
        self.names = names
        self._pods = {uid: (p.namespace, p.pod) for uid, p in names.pods.items()}
        self._containers = {cid: (c.namespace, c.pod, c.container) for cid, c in names.containers.items()}
        by_name = {pod: uid for uid, pod in self._pods.items()}
        for c in names.containers.values():
            if c.pod_uid:
                by_name.setdefault((c.namespace, c.pod), c.pod_uid)
        self._uid_by_name = by_name

    def container(self, identity: CgroupIdentity) -> ContainerKey | None:
        return None if identity.container_id is None else self._containers.get(identity.container_id)

    def pod_name(self, pod_uid: str) -> PodKey | None:
        return self._pods.get(pod_uid)

    def pod_uid(self, pod: PodKey) -> str | None:
        return self._uid_by_name.get(pod)


class LogDirSource:
    name = "logs"
    min_gap: float | None = MISS_REFRESH_GAP

    def __init__(self, settings: AttributionSettings) -> None:
        self._settings = settings
        self.period = settings.refresh_period
        self._scanner = LogDirScanner(settings.log_root)
        self._view: SourceView = EMPTY

    def expected(self) -> bool:
        return kubernetes_expected(self._settings)

    def refresh(self) -> None:
        try:
            self._view = NameView(self._scanner.scan())
        except OSError as exc:
            raise SourceError(
                f"cannot list {self._settings.log_root}/pods or /containers ({exc.strerror}): mount "
                "the host's /var/log/pods and /var/log/containers read-only or set log_root; "
                "pods stay unnamed meanwhile"
            ) from None

    def recovered(self) -> str:
        return f"log dirs under {self._settings.log_root} readable again"

    def view(self) -> SourceView:
        return self._view

    def diagnose(self) -> tuple[list[Row], SourceView]:
        root = self._settings.log_root
        if not self.expected():
            return [("log dirs", SKIP, not_kubernetes_reason(self._settings))], EMPTY
        try:
            names = LogDirScanner(root).scan()
        except OSError as exc:
            detail = f"cannot list {root}/pods and {root}/containers ({exc.strerror}): mount them read-only"
            return [("log dirs", FAIL, detail)], EMPTY
        detail = f"{len(names.pods)} pods, {len(names.containers)} containers under {root}"
        return [("log dirs", OK, detail)], NameView(names)

    def close(self) -> None:
        pass


def build(context: SourceContext) -> LogDirSource:
    return LogDirSource(context.settings)
