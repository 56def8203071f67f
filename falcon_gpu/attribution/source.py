"""What an attribution source is: one protocol, so adding one is a module and a registry line.

A *source* knows something about who uses the GPUs: the kubelet's allocations,
the kubelet's log directories (names), the API server (labels), later DRA claims
or plain Docker containers. Each follows one life cycle:

* :meth:`AttributionSource.refresh` runs off the hot path (the :class:`Refresher`
  thread, or ``refresh_now`` in a one-shot run). It may block on I/O. It raises
  :class:`SourceError` with a message that says how to fix the cause; the
  attributor counts it under the source's ``name`` (``errors_total{kind}``), logs
  it once and logs once when it recovers. It never has to touch telemetry itself.
* :meth:`AttributionSource.view` returns an immutable :class:`SourceView`: the
  answers of the last good refresh (or whatever the source decides to keep while
  it fails). The cycle reads only views, never the source, so it does no I/O.
* :meth:`AttributionSource.expected` says whether the source belongs on this
  host now (``kubernetes = auto`` on bare metal: no); a source not expected is
  not refreshed and not reported, so it stays quiet.
* :meth:`AttributionSource.diagnose` gives ``doctor`` its rows with a blocking
  read of its own, leaving the agent's state alone.

A :class:`SourceView` answers questions keyed by PID, by cgroup identity or by
device ID; a view answers only those it overrides (the others answer None:
"ask the next source"). :class:`~falcon_gpu.attribution.chain.Chain` asks the
views in registry order and takes the first answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import msgspec

from falcon_gpu.attribution.cgroup import CgroupIdentity
from falcon_gpu.attribution.device_ids import DeviceRef
from falcon_gpu.attribution.ledger import ContainerKey
from falcon_gpu.attribution.pod_requests import Requested
from falcon_gpu.attribution.runtime_cgroup import RuntimeContainer
from falcon_gpu.attribution.settings import AttributionSettings
from falcon_gpu.checks import Row
from falcon_gpu.model.telemetry import Telemetry

PodKey = tuple[str, str]
"""(namespace, pod)."""
Labels = tuple[tuple[str, str], ...]


class SourceContext(msgspec.Struct, frozen=True):  # collected: holds a clock and the Telemetry
    """What a source's ``build`` gets: its settings, the clock, and telemetry for problems that
    are not a failed refresh (an unknown DRA driver: counted and logged once, the refresh goes on)."""

    settings: AttributionSettings
    clock: Callable[[], float]
    telemetry: Telemetry


class SourceError(Exception):
    """A refresh failed; the message is logged once and says what to check."""


class SourceHealth(msgspec.Struct, frozen=True, gc=False):
    """A source's own state: did its last refresh work, and if not, why."""

    ok: bool = False
    """False until the first refresh succeeds."""
    last_error: str | None = None


class Allocation(msgspec.Struct, frozen=True, gc=False):
    """Devices given to one container for one resource (device plugins, DRA claims)."""

    namespace: str
    pod: str
    container: str
    resource: str
    """The kubelet resource name (``nvidia.com/gpu``), or ``dra:<driver>`` for a DRA claim."""
    devices: tuple[DeviceRef, ...]
    claim_name: str | None = None
    """DRA: the ResourceClaim the devices come from."""
    claim_namespace: str | None = None


class SourceView:
    """Immutable answers of one source. Every question answers None ("not mine") by default."""

    def container_of_pid(self, pid: int) -> ContainerKey | None:
        """The container a host PID belongs to, when this source knows PIDs directly."""
        return None

    def container(self, identity: CgroupIdentity) -> ContainerKey | None:
        """The container a cgroup identity names (pod UID + container ID)."""
        return None

    def pod_name(self, pod_uid: str) -> PodKey | None:
        """A pod UID's namespace and name."""
        return None

    def pod_uid(self, pod: PodKey) -> str | None:
        """A pod's UID from its namespace and name."""
        return None

    def sole_container(self, pod: PodKey) -> str | None:
        """The pod's only GPU container, for a process in the pod's own cgroup (no container ID)."""
        return None

    def allocations(self) -> Sequence[Allocation] | None:
        """Devices allocated to containers (by device ID); None: this source cannot tell."""
        return None

    def allocatable_devices(self) -> tuple[tuple[str, int], ...] | None:
        """(resource, distinct devices) this node can hand out; None: unknown."""
        return None

    def labels(self, pod_uid: str | None, pod: PodKey) -> Labels | None:
        """Copied pod labels (already sanitised names)."""
        return None

    def requested(self, container: ContainerKey) -> Requested | None:
        """The container's GPU quota per GPU (``pod_requests``); None: none known."""
        return None

    def owner(self, pod: PodKey) -> str | None:
        """The pod's controller (``ownerReferences``), the workload of right-sizing advice."""
        return None

    def plain_container_name(self, container: RuntimeContainer) -> str | None:
        """The runtime's name of a container outside Kubernetes (Docker, Podman)."""
        return None

    def user_name(self, uid: int) -> str | None:
        """The host's name for a uid (Slurm job owners)."""
        return None


EMPTY = SourceView()


class AttributionSource(Protocol):
    """One attribution source; see the module docstring for the life cycle."""

    name: str
    """Its ``errors_total`` kind, its key in ``sources_ok`` and its refresher task."""
    period: float
    """Seconds between background refreshes."""
    min_gap: float | None
    """Earliest re-refresh when a cycle meets something unknown; None: never early."""

    def expected(self) -> bool:
        """Whether the source belongs on this host now (cheap; evaluated off the hot path)."""
        ...

    def refresh(self) -> None:
        """Re-read what the source knows. Raises SourceError; may block (never in a cycle)."""
        ...

    def recovered(self) -> str:
        """The message logged once when a failing source answers again."""
        ...

    def view(self) -> SourceView:
        """The current answers; never blocks."""
        ...

    def diagnose(self) -> tuple[list[Row], SourceView]:
        """doctor's rows and the view read for them, by a blocking read that changes no state."""
        ...

    def close(self) -> None:
        """Release what it holds (channels, sessions); a call in flight returns at once."""
        ...
