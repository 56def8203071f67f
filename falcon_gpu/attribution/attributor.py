"""The attribution stage the agent calls each cycle: snapshot in, :class:`Attribution` out.

Wires the readers together and keeps them off the hot path:

* in the cycle: ``/proc/<pid>/cgroup`` for PIDs not yet cached (procfs, cheap),
  then the pure join against the current :class:`Lookups`;
* in the background (:class:`Refresher`): kubelet PodResources, the log-dir name
  maps and, with ``pod_labels``, the API server; each on its own period and, when
  a cycle meets a container it cannot name, early (rate-limited).

Failures are values: a missing socket, log dir or API server is counted and
logged once through telemetry (``failing``/``recovered``), attribution carries
on with what it has (cgroups alone when the kubelet is down), and
:meth:`Attributor.attribute` never raises.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from falcon_gpu.attribution.device_index import place_processes
from falcon_gpu.attribution.joiner import Joiner, JoinResult, Lookups
from falcon_gpu.attribution.kube_api import KubeApiConfig, KubeApiError, PodLabels, PodLabelSource
from falcon_gpu.attribution.logdirs import LogDirScanner, NameMaps
from falcon_gpu.attribution.pid_cache import PidCache
from falcon_gpu.attribution.podresources.client import (
    KubeletAllocations,
    PodResourcesClient,
    PodResourcesError,
)
from falcon_gpu.attribution.presence import kubernetes_expected
from falcon_gpu.attribution.refresher import Refresher
from falcon_gpu.checks import Row
from falcon_gpu.model.attribution import Attribution
from falcon_gpu.model.snapshot import Snapshot
from falcon_gpu.settings import Settings
from falcon_gpu.telemetry import Telemetry

KUBE_API_PERIOD = 60.0
KUBELET_STALE_GRACE = 120.0
"""Keep the last kubelet answer this long while the socket fails: a kubelet restart takes
seconds, and dropping every allocation for it would flap ``allocated`` and reset idle timers."""
MISS_REFRESH_GAP = 5.0
"""At most one early refresh per this many seconds when a cycle meets an unknown container."""
"""Relist of this node's pods for labels; labels rarely change, and a list per minute is cheap."""


def snapshot_pids(snapshot: Snapshot) -> list[int]:
    return [p.pid for dev in snapshot.devices for _, p in place_processes(dev)]


class Attributor:
    def __init__(
        self,
        settings: Settings,
        telemetry: Telemetry,
        *,
        clock: Callable[[], float] = time.monotonic,
        kube_api: KubeApiConfig | None = None,
    ) -> None:
        """``kube_api`` overrides the in-cluster API server (tests); used only with ``pod_labels``."""
        self._settings = settings
        self._telemetry = telemetry
        self._clock = clock
        self._pids = PidCache(settings.proc_root, clock=clock)
        self._scanner = LogDirScanner(settings.log_root)
        self._kubelet = PodResourcesClient(settings.kubelet_socket, settings.gpu_resources)
        self._label_source: PodLabelSource | None = None
        if settings.pod_labels:
            config = kube_api or KubeApiConfig.in_cluster()
            if config is not None:
                self._label_source = PodLabelSource(config, settings.node, settings.pod_labels)
        self._names = NameMaps()
        self._allocations: KubeletAllocations | None = None
        self._allocations_at = 0.0
        self._labels: PodLabels | None = None
        self._ok = {"kubelet": False, "logs": False, "kube_api": False}
        self._kubernetes = kubernetes_expected(settings)
        """False on a host without Kubernetes (setting ``kubernetes``): its sources are not reported."""
        self._lookups = Lookups()
        self._swap = threading.Lock()
        self._join_lock = threading.Lock()
        retention = max(600.0, 3 * settings.interval)
        self._joiner = Joiner(process_metrics=settings.process_metrics, retention=retention)
        self.last: JoinResult | None = None
        """The latest cycle's join (for doctor and tests)."""

        period = max(5.0, min(settings.interval, 30.0))
        self._refresher = Refresher()
        if settings.kubernetes != "off":
            self._refresher.add("kubelet", self._refresh_kubelet, period=period, min_gap=MISS_REFRESH_GAP)
            self._refresher.add("logs", self._refresh_logs, period=period, min_gap=MISS_REFRESH_GAP)
        if settings.pod_labels:
            self._refresher.add("kube_api", self._refresh_labels, period=KUBE_API_PERIOD, min_gap=15.0)

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> None:
        """Start the background refreshers (idempotent)."""
        self._refresher.start()

    def wait_ready(self, timeout: float) -> bool:
        """Wait until every lookup has been refreshed once (started by :meth:`start` or
        :meth:`refresh_now`); False after ``timeout`` s. The agent's first cycle calls it."""
        return self._refresher.wait_first_round(timeout)

    def refresh_now(self) -> None:
        """Refresh every lookup synchronously, so the next :meth:`attribute` is complete."""
        self._refresher.run_all()

    def close(self) -> None:
        self._kubelet.close()  # cancels a List hung in the kubelet, so the refresher stops at once
        self._refresher.stop()
        self._kubelet.close()  # and the channel a refresh may have opened meanwhile
        if self._label_source is not None:
            self._label_source.close()

    # -- background refreshes -------------------------------------------------
    def _publish(self) -> None:
        with self._swap:
            self._lookups = Lookups.build(self._names, self._allocations, self._labels)

    def _refresh_kubelet(self) -> None:
        self._kubernetes = kubernetes_expected(self._settings)
        if not self._kubernetes:  # kubernetes = "auto" on a host without it: quiet
            return
        try:
            self._allocations = self._kubelet.fetch()
            self._allocations_at = self._clock()
        except PodResourcesError as exc:
            if self._clock() - self._allocations_at > KUBELET_STALE_GRACE:
                self._allocations = None  # too old to trust: cgroups alone
            self._ok["kubelet"] = False
            self._telemetry.failing(
                "kubelet", "kubelet", f"{exc}; attributing from cgroups alone until it answers"
            )
        else:
            self._ok["kubelet"] = True
            self._telemetry.recovered(
                "kubelet", f"kubelet PodResources on {self._kubelet.socket_path} answers again"
            )
        self._publish()

    def _refresh_logs(self) -> None:
        self._kubernetes = kubernetes_expected(self._settings)
        if not self._kubernetes:
            return
        try:
            self._names = self._scanner.scan()
        except OSError as exc:
            self._ok["logs"] = False
            self._telemetry.failing(
                "logs",
                "logs",
                f"cannot list {self._settings.log_root}/pods or /containers ({exc.strerror}): mount "
                "the host's /var/log/pods and /var/log/containers read-only or set log_root; "
                "pods stay unnamed meanwhile",
            )
        else:
            self._ok["logs"] = True
            self._telemetry.recovered("logs", f"log dirs under {self._settings.log_root} readable again")
            self._publish()

    def _refresh_labels(self) -> None:
        if self._label_source is None:
            self._ok["kube_api"] = False
            self._telemetry.failing(
                "kube_api",
                "kube_api",
                "pod_labels is set but KUBERNETES_SERVICE_HOST is not: not running in a cluster, "
                "labels omitted",
            )
            return
        try:
            self._labels = self._label_source.fetch()
        except KubeApiError as exc:
            self._ok["kube_api"] = False
            self._telemetry.failing("kube_api", "kube_api", f"{exc}; keeping the last labels")
        else:
            self._ok["kube_api"] = True
            self._telemetry.recovered("kube_api", "Kubernetes API answers again; pod labels refreshed")
        self._publish()

    # -- the cycle ------------------------------------------------------------
    def attribute(self, snapshot: Snapshot) -> Attribution:
        """Join this snapshot's processes and the kubelet's allocations to pods. Never raises."""
        try:
            return self._attribute(snapshot)
        except Exception:
            logging.getLogger("falcon_gpu.attribution").debug("attribution failed", exc_info=True)
            self._telemetry.failing(
                "attribution",
                "attribution",
                "attribution failed this cycle (bug); pod metrics omitted",
                level=logging.ERROR,
            )
            return Attribution(sources_ok={"cgroup": False, **self._ok})

    def _attribute(self, snapshot: Snapshot) -> Attribution:
        now = self._clock()
        pids = snapshot_pids(snapshot)
        identities = {pid: self._pids.lookup(pid) for pid in pids}
        self._pids.retain(pids)
        cgroup_ok = not pids or any(self._pids.was_readable(pid) for pid in pids)
        if cgroup_ok:
            proc_root = self._settings.proc_root
            self._telemetry.recovered("cgroup", f"GPU processes visible under {proc_root} again")
        else:
            self._telemetry.failing(
                "cgroup",
                "cgroup",
                f"none of the {len(pids)} GPU process IDs exists under {self._settings.proc_root}: run the "
                "agent with hostPID: true (or mount the host's /proc and set proc_root); "
                "every process stays unattributed",
            )
        sources_ok = {"cgroup": cgroup_ok, **self._ok}
        if not self._settings.pod_labels:
            sources_ok.pop("kube_api")
        if not self._kubernetes:
            sources_ok.pop("kubelet")
            sources_ok.pop("logs")
        with self._join_lock:
            result = self._joiner.join(snapshot, identities, self._lookups, now, sources_ok)
        if result.misses:
            self._telemetry.error("attribution_unresolved", len(result.misses))
            self._refresher.request("logs")
            self._refresher.request("kubelet")
        self._telemetry.recovered("attribution", "attribution works again")
        self.last = result
        return result.attribution

    # -- doctor ---------------------------------------------------------------
    def diagnose(self, snapshot: Snapshot) -> list[Row]:
        """Rows for ``doctor``: host PID visibility, kubelet socket, log dirs, labels, attributed count.

        Blocking calls are fine here (doctor is not a cycle); the join uses a
        throwaway ledger so the agent's energy counters are not disturbed.
        """
        from falcon_gpu.attribution.diagnose import diagnose_rows

        return diagnose_rows(self._settings, snapshot, self._pids, self._kubelet, self._label_source)
