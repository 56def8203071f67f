"""Source ``kubelet``: which container holds which GPU, from PodResources v1.

Device-plugin allocations (``devices``) and DRA claims (``dynamic_resources``,
:mod:`falcon_gpu.attribution.dra_claims`) come from one List call, so one source
answers both: by device ID (allocations, allocatable counts), and it names a
pod's only GPU container for a process in the pod's own cgroup. While the socket fails, the last
answer is kept for :data:`KUBELET_STALE_GRACE`: a kubelet restart takes seconds,
and dropping every allocation for it would flap ``allocated`` and reset idle
timers; after that attribution goes on from cgroups alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from falcon_gpu.attribution.dra_claims import claim_allocations, unknown_message
from falcon_gpu.attribution.podresources.client import (
    ClaimDevice,
    KubeletAllocations,
    PodResourcesClient,
    PodResourcesError,
)
from falcon_gpu.attribution.presence import kubernetes_expected, not_kubernetes_reason
from falcon_gpu.attribution.registry import MISS_REFRESH_GAP
from falcon_gpu.attribution.settings import AttributionSettings
from falcon_gpu.attribution.source import EMPTY, Allocation, PodKey, SourceContext, SourceError, SourceView
from falcon_gpu.checks import FAIL, OK, SKIP, Row
from falcon_gpu.model.telemetry import Telemetry

KUBELET_STALE_GRACE = 120.0


def sole_containers(allocations: Sequence[Allocation]) -> dict[PodKey, str | None]:
    """Per pod, its one container holding GPUs (None: several), for processes in the pod's own cgroup."""
    sole: dict[PodKey, str | None] = {}
    for a in allocations:
        pod = (a.namespace, a.pod)
        prev = sole.get(pod, a.container)
        sole[pod] = a.container if prev == a.container else None
    return sole


class KubeletView(SourceView):
    def __init__(self, answer: KubeletAllocations, claimed: tuple[Allocation, ...] = ()) -> None:
        self._answer = answer
        self._allocations = answer.allocations + claimed
        self._sole = sole_containers(self._allocations)

    def allocations(self) -> Sequence[Allocation]:
        return self._allocations

    def allocatable_devices(self) -> tuple[tuple[str, int], ...] | None:
        return self._answer.allocatable_devices

    def sole_container(self, pod: PodKey) -> str | None:
        return self._sole.get(pod)


class KubeletSource:
    name = "kubelet"
    min_gap: float | None = MISS_REFRESH_GAP

    def __init__(
        self, settings: AttributionSettings, telemetry: Telemetry, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._settings = settings
        self._telemetry = telemetry
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
        self._view = KubeletView(answer, claim_allocations(answer.claims, self._unknown_claim))
        self._answered_at = self._clock()

    def _unknown_claim(self, claim: ClaimDevice) -> None:
        self._telemetry.failing(f"dra:{claim.driver}", "dra_driver", unknown_message(claim))

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
        unmapped: list[ClaimDevice] = []
        claimed = claim_allocations(answer.claims, unmapped.append)
        detail = (
            f"{self._settings.kubelet_socket} answers; {len(answer.allocations)} GPU allocations, "
            f"{len(answer.allocatable)} allocatable GPU devices"
        )
        if answer.claims:
            detail += (
                f", {len(answer.claims) - len(unmapped)} of {len(answer.claims)} DRA claim devices mapped"
            )
        return [("kubelet socket", OK, detail)], KubeletView(answer, claimed)

    def close(self) -> None:
        self.client.close()


def build(context: SourceContext) -> KubeletSource:
    return KubeletSource(context.settings, context.telemetry, context.clock)
