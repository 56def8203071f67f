"""Source ``kube_api``: pod labels, job names and GPU quotas from the API server (``pod_labels``,
``job_labels``, ``pod_requests``).

Answers labels by pod UID, else by namespace and name (allocations carry no UID),
containers' GPU quotas (requested vs used) and pod UIDs (for ``pod_uid``) from the
same pod list: with every setting on, still one list per period. While the API
server fails, the last answers are kept. Not in the registry's answer at all when
``pod_labels`` is empty, ``pod_requests`` off and ``job_labels`` has no API access to
use (``presence.kube_api_wanted``): the API server is never contacted.
"""

from __future__ import annotations

from falcon_gpu.attribution.kube_api import KubeApiConfig, KubeApiError, PodLabels, PodLabelSource
from falcon_gpu.attribution.ledger import ContainerKey
from falcon_gpu.attribution.pod_requests import Requested
from falcon_gpu.attribution.presence import kube_api_wanted
from falcon_gpu.attribution.registry import KUBE_API_PERIOD
from falcon_gpu.attribution.settings import AttributionSettings
from falcon_gpu.attribution.source import EMPTY, Labels, PodKey, SourceContext, SourceError, SourceView
from falcon_gpu.checks import FAIL, Row, verdict

NOT_IN_CLUSTER = "pod_labels/pod_requests is set but KUBERNETES_SERVICE_HOST is not"
ROW = "pod labels (Kubernetes API)"


class LabelView(SourceView):
    def __init__(self, labels: PodLabels) -> None:
        self._labels = labels

    def labels(self, pod_uid: str | None, pod: PodKey) -> Labels | None:
        found = self._labels.by_uid.get(pod_uid) if pod_uid else None
        return found if found is not None else self._labels.by_name.get(pod, ())

    def requested(self, container: ContainerKey) -> Requested | None:
        return self._labels.requested.get(container)

    def pod_uid(self, pod: PodKey) -> str | None:
        return self._labels.uids.get(pod)

    def owner(self, pod: PodKey) -> str | None:
        return self._labels.owners.get(pod)


class PodLabelsSource:
    name = "kube_api"
    period = KUBE_API_PERIOD
    min_gap: float | None = None

    def __init__(self, settings: AttributionSettings) -> None:
        self._node = settings.node
        config = settings.kube_api or KubeApiConfig.in_cluster()
        self._client = (
            None
            if config is None
            else PodLabelSource(
                config,
                settings.node,
                settings.pod_labels,
                quotas=settings.pod_requests,
                jobs=settings.job_labels,
            )
        )
        self._view: SourceView = EMPTY

    def expected(self) -> bool:
        return True

    def refresh(self) -> None:
        if self._client is None:
            raise SourceError(f"{NOT_IN_CLUSTER}: not running in a cluster, labels omitted")
        try:
            self._view = LabelView(self._client.fetch())
        except KubeApiError as exc:
            raise SourceError(f"{exc}; keeping the last labels") from None

    def recovered(self) -> str:
        return "Kubernetes API answers again; pod labels refreshed"

    def view(self) -> SourceView:
        return self._view

    def diagnose(self) -> tuple[list[Row], SourceView]:
        if self._client is None:
            return [(ROW, FAIL, "pod_labels/pod_requests is set but not running in a cluster")], EMPTY
        try:
            labels = self._client.fetch()
        except KubeApiError as exc:
            return [(ROW, FAIL, str(exc))], EMPTY
        found = len(labels.by_uid)
        detail = f"{found} pods on node {self._node}"
        if not found:  # the usual cause: node defaults to the host name, not the node name
            detail += "; none: set NODE_NAME from spec.nodeName (downward API) or set node"
        return [(ROW, verdict(found > 0), detail)], LabelView(labels)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def build(context: SourceContext) -> PodLabelsSource | None:
    return PodLabelsSource(context.settings) if kube_api_wanted(context.settings) else None
