"""Source ``kubelet``: which container holds which GPU, from PodResources v1 (device plugins).

Answers by device ID (allocations, allocatable counts) and names a pod's only GPU
container for a process in the pod's own cgroup. While the socket fails, the last
answer is kept for :data:`KUBELET_STALE_GRACE`: a kubelet restart takes seconds,
and dropping every allocation for it would flap ``allocated`` and reset idle
timers; after that attribution goes on from cgroups alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from falcon_gpu.attribution.podresources.client import (
    KubeletAllocations,
    PodResourcesClient,
    PodResourcesError,
)
from falcon_gpu.attribution.presence import kubernetes_expected, not_kubernetes_reason
from falcon_gpu.attribution.settings import AttributionSettings
from falcon_gpu.attribution.source import EMPTY, Allocation, PodKey, SourceError, SourceView
from falcon_gpu.checks import FAIL, OK, SKIP, Row

KUBELET_STALE_GRACE = 120.0
MISS_REFRESH_GAP = 5.0
"""At most one early refresh per this many seconds when a cycle meets an unknown container."""


class KubeletView(SourceView):
    def __init__(self, answer: KubeletAllocations) -> None:
        self._answer = answer
        sole: dict[PodKey, str | None] = {}
        for a in answer.allocations:
            pod = (a.namespace, a.pod)
            prev = sole.get(pod, a.container)
            sole[pod] = a.container if prev == a.container else None
        self._sole = sole

    def allocations(self) -> Sequence[Allocation]:
        return self._answer.allocations

    def allocatable_devices(self) -> tuple[tuple[str, int], ...] | None:
        return self._answer.allocatable_devices

    def sole_container(self, pod: PodKey) -> str | None:
        return self._sole.get(pod)


class KubeletSource:
    name = "kubelet"
    min_gap: float | None = MISS_REFRESH_GAP

    def __init__(self, settings: AttributionSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self._settings = settings
        self._clock = clock
        self.period = settings.refresh_period
        self.client = PodResourcesClient(settings.kubelet_socket, settings.gpu_resources)
        self._view: SourceView = EMPTY
        self._answered_at = 0.0

    def expected(self) -> bool:
        return kubernetes_expected(self._settings)

    def refresh(self) -> None:
        try:
            answer = self.client.fetch()
        except PodResourcesError as exc:
            if self._clock() - self._answered_at > KUBELET_STALE_GRACE:
                self._view = EMPTY  # too old to trust: cgroups alone
            raise SourceError(f"{exc}; attributing from cgroups alone until it answers") from None
        self._view = KubeletView(answer)
        self._answered_at = self._clock()

    def recovered(self) -> str:
        return f"kubelet PodResources on {self.client.socket_path} answers again"

    def view(self) -> SourceView:
        return self._view

    def diagnose(self) -> tuple[list[Row], SourceView]:
        if not self.expected():
            return [("kubelet socket", SKIP, not_kubernetes_reason(self._settings))], EMPTY
        try:
            answer = self.client.fetch()
        except PodResourcesError as exc:
            return [("kubelet socket", FAIL, str(exc))], EMPTY
        detail = (
            f"{self._settings.kubelet_socket} answers; {len(answer.allocations)} GPU allocations, "
            f"{len(answer.allocatable)} allocatable GPU devices"
        )
        return [("kubelet socket", OK, detail)], KubeletView(answer)

    def close(self) -> None:
        self.client.close()


def build(settings: AttributionSettings, clock: Callable[[], float]) -> KubeletSource:
    return KubeletSource(settings, clock)
