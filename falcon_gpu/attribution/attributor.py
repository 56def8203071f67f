"""The attribution stage the agent calls each cycle: snapshot in, :class:`Attribution` out.

Keeps the sources (:mod:`falcon_gpu.attribution.registry`) off the hot path:

* in the cycle: ``/proc/<pid>/cgroup`` for PIDs not yet cached (procfs, cheap),
  then the pure join against the current :class:`Chain` of source views;
* in the background (:class:`Refresher`): each source's ``refresh`` on its own
  period and, when a cycle meets a container it cannot name, early
  (rate-limited by the source's ``min_gap``).

Failures are values: a source that raises :class:`SourceError` is counted under
its name, logged once (``failing``/``recovered``) and keeps whatever view it
chose to keep; attribution carries on with the others (cgroups alone when the
kubelet is down), and :meth:`Attributor.attribute` never raises.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence

from falcon_gpu.attribution.chain import Chain
from falcon_gpu.attribution.device_index import place_processes
from falcon_gpu.attribution.joiner import Joiner
from falcon_gpu.attribution.pid_cache import PidCache
from falcon_gpu.attribution.refresher import Refresher
from falcon_gpu.attribution.registry import SOURCES, SourceFactory, build_sources
from falcon_gpu.attribution.settings import AttributionSettings
from falcon_gpu.attribution.slurm_names import SlurmNames
from falcon_gpu.attribution.source import AttributionSource, SourceContext, SourceError, SourceHealth
from falcon_gpu.checks import Row
from falcon_gpu.model.attribution import Attribution
from falcon_gpu.model.snapshot import Snapshot
from falcon_gpu.model.telemetry import Telemetry


def snapshot_pids(snapshot: Snapshot) -> list[int]:
    return [p.pid for dev in snapshot.devices for _, p in place_processes(dev)]


class _Tracked:
    """One source with the state the attributor keeps for it: health and whether it is expected."""

    __slots__ = ("expected", "health", "source")

    def __init__(self, source: AttributionSource) -> None:
        self.source = source
        self.health = SourceHealth()
        self.expected = source.expected()


class Attributor:
    def __init__(
        self,
        settings: AttributionSettings,
        telemetry: Telemetry,
        *,
        clock: Callable[[], float] = time.monotonic,
        sources: Sequence[SourceFactory] = SOURCES,
    ) -> None:
        """``sources``: the registry (tests add their own source to it)."""
        self._settings = settings
        self._telemetry = telemetry
        self._clock = clock
        self._pids = PidCache(settings.proc_root, clock=clock)
        self.slurm_names = SlurmNames(settings.proc_root)
        context = SourceContext(settings, clock, telemetry)
        self._tracked = [_Tracked(s) for s in build_sources(context, sources)]
        self._chain = Chain()
        self._swap = threading.Lock()
        self._join_lock = threading.Lock()
        self._joiner = Joiner(
            process_metrics=settings.process_metrics, retention=settings.retention, pod_uid=settings.pod_uid
        )
        self._refresher = Refresher()
        for tracked in self._tracked:
            source = tracked.source
            gap = float("inf") if source.min_gap is None else source.min_gap
            refresh = functools.partial(self._refresh, tracked)
            self._refresher.add(source.name, refresh, period=source.period, min_gap=gap)

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> None:
        """Start the background refreshers (idempotent)."""
        self._refresher.start()

    def wait_ready(self, timeout: float) -> bool:
        """Wait until every source has been refreshed once (started by :meth:`start` or
        :meth:`refresh_now`); False after ``timeout`` s. The agent's first cycle calls it."""
        return self._refresher.wait_first_round(timeout)

    def refresh_now(self) -> None:
        """Refresh every source synchronously, so the next :meth:`attribute` is complete."""
        self._refresher.run_all()

    def close(self) -> None:
        self._refresher.signal_stop()  # no next task starts after the one in progress
        for tracked in self._tracked:  # cancels a call hung in a server, so the refresher stops at once
            tracked.source.close()
        self._refresher.stop()
        for tracked in self._tracked:  # and what a refresh may have opened meanwhile
            tracked.source.close()

    def health(self) -> dict[str, SourceHealth]:
        """Each expected source's own health (doctor, tests)."""
        return {t.source.name: t.health for t in self._tracked if t.expected}

    # -- background refreshes -------------------------------------------------
    def _refresh(self, tracked: _Tracked) -> None:
        source = tracked.source
        tracked.expected = source.expected()
        if not tracked.expected:  # e.g. kubernetes = "auto" on a host without it: quiet
            return
        try:
            source.refresh()
        except SourceError as exc:
            message = str(exc)
            tracked.health = SourceHealth(False, message)
            self._telemetry.failing(source.name, source.name, message)
        else:
            tracked.health = SourceHealth(True)
            self._telemetry.recovered(source.name, source.recovered())
        chain = Chain([t.source.view() for t in self._tracked])
        with self._swap:
            self._chain = chain

    # -- the cycle ------------------------------------------------------------
    def attribute(self, snapshot: Snapshot) -> Attribution:
        """Join this snapshot's processes to containers through the sources. Never raises."""
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
            return Attribution(sources_ok={"cgroup": False, **self._sources_ok()})

    def _sources_ok(self) -> dict[str, bool]:
        return {t.source.name: t.health.ok for t in self._tracked if t.expected}

    def _attribute(self, snapshot: Snapshot) -> Attribution:
        now = self._clock()
        pids = snapshot_pids(snapshot)
        identities = {pid: self._pids.lookup(pid) for pid in pids}
        self._pids.retain(pids)
        cgroup_ok = not pids or any(self._pids.was_readable(pid) for pid in pids)
        proc_root = self._settings.proc_root
        if cgroup_ok:
            self._telemetry.recovered("cgroup", f"GPU processes visible under {proc_root} again")
        else:
            self._telemetry.failing(
                "cgroup",
                "cgroup",
                f"none of the {len(pids)} GPU process IDs exists under {proc_root}: run the "
                "agent with hostPID: true (or mount the host's /proc and set proc_root); "
                "every process stays unattributed",
            )
        sources_ok = {"cgroup": cgroup_ok, **self._sources_ok()}
        with self._swap:
            chain = self._chain
        with self._join_lock:
            plain = {pid: self._pids.plain_container(pid) for pid in pids if identities[pid] is None}
            slurm = {pid: self._pids.slurm_step(pid) for pid in pids if identities[pid] is None}
            names = self.slurm_names.update(slurm) if cgroup_ok else None
            result = self._joiner.join(snapshot, identities, chain, now, sources_ok, plain, slurm, names)
        if result.misses:
            self._telemetry.error("attribution_unresolved", len(result.misses))
            for tracked in self._tracked:
                if tracked.source.min_gap is not None:
                    self._refresher.request(tracked.source.name)
        self._telemetry.recovered("attribution", "attribution works again")
        return result.attribution

    # -- doctor ---------------------------------------------------------------
    def diagnose(self, snapshot: Snapshot) -> list[Row]:
        """Rows for ``doctor``: host PID visibility, one or more per source, attributed count.

        Blocking calls are fine here (doctor is not a cycle); the join uses a
        throwaway ledger so the agent's energy counters are not disturbed.
        """
        from falcon_gpu.attribution.diagnose import diagnose_rows

        return diagnose_rows(self._settings, snapshot, self._pids, [t.source for t in self._tracked])
