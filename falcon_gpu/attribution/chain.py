"""The sources' views in registry order, asked as one: the first answer wins.

Built off the hot path each time a source refreshes, and swapped in whole, so a
cycle reads a consistent set of answers without locks. For each question only
the views that override it are asked (found once, when the chain is built), so
a question no source answers costs one empty loop, not a call per source.

:meth:`Chain.container` is the whole name resolution for one process: a source
that knows the PID, else a source that names the cgroup identity, else, for a
process in the pod's own cgroup (no container ID), the pod's only GPU container.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from falcon_gpu.attribution.cgroup import CgroupIdentity
from falcon_gpu.attribution.ledger import ContainerKey
from falcon_gpu.attribution.pod_requests import Requested
from falcon_gpu.attribution.runtime_cgroup import RuntimeContainer
from falcon_gpu.attribution.source import Allocation, Labels, PodKey, SourceView

T = TypeVar("T")


def _answering(views: Sequence[SourceView], question: Callable[..., object]) -> tuple[SourceView, ...]:
    name = question.__name__
    return tuple(v for v in views if getattr(type(v), name) is not question)


class Chain:
    def __init__(self, views: Sequence[SourceView] = ()) -> None:
        self.views = tuple(views)
        self._by_pid = _answering(self.views, SourceView.container_of_pid)
        self._container = _answering(self.views, SourceView.container)
        self._pod_name = _answering(self.views, SourceView.pod_name)
        self._pod_uid = _answering(self.views, SourceView.pod_uid)
        self._sole = _answering(self.views, SourceView.sole_container)
        self._labels = _answering(self.views, SourceView.labels)
        self._requested = _answering(self.views, SourceView.requested)
        self._owner = _answering(self.views, SourceView.owner)
        self._plain = _answering(self.views, SourceView.plain_container_name)
        self._users = _answering(self.views, SourceView.user_name)
        allocations: list[Allocation] = []
        known = False
        for view in _answering(self.views, SourceView.allocations):
            found = view.allocations()
            if found is not None:
                known = True
                allocations.extend(found)
        self.allocations: tuple[Allocation, ...] | None = tuple(allocations) if known else None
        """Every source's allocations, in registry order; None when no source could tell."""
        self.allocatable_devices = _first(
            v.allocatable_devices() for v in _answering(self.views, SourceView.allocatable_devices)
        )

    def container(self, pid: int, identity: CgroupIdentity | None) -> ContainerKey | None:
        """The container of one process, or None (in no pod, or not named yet)."""
        for view in self._by_pid:
            found = view.container_of_pid(pid)
            if found is not None:
                return found
        if identity is None:
            return None
        for view in self._container:
            found = view.container(identity)
            if found is not None:
                return found
        pod = self.pod_name(identity.pod_uid)
        if pod is not None:
            for view in self._sole:
                sole = view.sole_container(pod)
                if sole is not None:
                    return (pod[0], pod[1], sole) if sole else None
        return None

    # Explicit loops, not ``_first(generator)``: these run per process or per container each cycle.
    def pod_name(self, pod_uid: str) -> PodKey | None:
        for view in self._pod_name:
            found = view.pod_name(pod_uid)
            if found is not None:
                return found
        return None

    def pod_uid(self, pod: PodKey) -> str | None:
        for view in self._pod_uid:
            found = view.pod_uid(pod)
            if found is not None:
                return found
        return None

    def plain_container_name(self, container: RuntimeContainer) -> str:
        """The runtime's name, or the short ID where no source names it."""
        for view in self._plain:
            found = view.plain_container_name(container)
            if found is not None:
                return found
        return container.container_id[:12]

    def user_name(self, uid: int) -> str | None:
        for view in self._users:
            found = view.user_name(uid)
            if found is not None:
                return found
        return None

    def labels(self, pod_uid: str | None, pod: PodKey) -> Labels:
        for view in self._labels:
            found = view.labels(pod_uid, pod)
            if found is not None:
                return found
        return ()

    def requested(self, container: ContainerKey) -> Requested | None:
        return _first(view.requested(container) for view in self._requested)

    def owner(self, pod: PodKey) -> str | None:
        return _first(view.owner(pod) for view in self._owner)


def _first(answers: Iterable[T | None]) -> T | None:
    for answer in answers:
        if answer is not None:
            return answer
    return None
