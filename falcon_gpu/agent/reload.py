"""SIGHUP: reload the configuration as Prometheus does, between two cycles.

The file (with the environment and the flags, as at start) is loaded and validated first; one that
does not load keeps the running configuration, logged and counted (``errors_total{kind="reload"}``).
One that loads and differs gets a new runtime built from it (sinks, policies, attribution, NVML,
job records) before the old one is closed, so a part that cannot be built (an unusable
``spool_dir``) keeps the old one as well. What stays across a reload:

- the ``listen`` socket and its latest-cycle view (a changed ``listen`` address is logged and takes
  a restart: scrapers keep their target);
- the spools: a sink's spool directory is only opened (locked) by its first batch, so the new sink
  takes the old one's directory, and backlog, once the old one has closed;
- the agent's own counters (one :class:`~falcon_gpu.model.telemetry.Telemetry`).

The old runtime closes as at shutdown (its sinks get their ``timeout`` to deliver), then the job
tracker is made again: it reads the open jobs the old one has just saved.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from falcon_gpu.agent.cycle import CycleRunner
from falcon_gpu.agent.runtime import Runtime, build, job_tracker
from falcon_gpu.settings_sources import ConfigError

if TYPE_CHECKING:
    from falcon_gpu.settings import Settings

log = logging.getLogger(__name__)


class Running:
    """The configuration in force, the runtime built from it and its cycle."""

    def __init__(
        self,
        loaded: Settings,
        rt: Runtime,
        make_runner: Callable[[Runtime], CycleRunner],
        shutdown_timeout: Callable[[Settings], float],
    ) -> None:
        self.loaded, self.rt = loaded, rt
        self._make_runner, self._shutdown_timeout = make_runner, shutdown_timeout
        self.runner = make_runner(rt)

    def cycle(self) -> object:
        return self.runner.run()

    def reload(self, load: Callable[[], Settings], *, simulate: str | None) -> float:
        """Reload (see the module docstring); returns the interval to go on with."""
        old = self.rt
        try:
            settings = load()
        except (ConfigError, ValueError, OSError) as exc:
            old.telemetry.error("reload")
            log.error("reload: the configuration does not load, keeping the running one: %s", exc)
            return self.loaded.interval
        if settings == self.loaded:
            log.info("reload: the configuration is unchanged")
            return self.loaded.interval
        if settings.listen != self.loaded.listen:
            log.warning("reload: listen changed to %r; the endpoint stays on %r until a restart",
                        settings.listen, self.loaded.listen)  # fmt: skip
        try:
            new = build(settings, simulate=simulate, telemetry=old.telemetry)
        except (ConfigError, ValueError, OSError) as exc:
            old.telemetry.error("reload")
            log.error("reload: cannot build the new configuration, keeping the running one: %s", exc)
            return self.loaded.interval
        from falcon_gpu.listen.latest import LatestCycle

        listener, kept = old.listener, [s for s in old.sinks if isinstance(s, LatestCycle)]
        old.listener, old.sinks = None, [s for s in old.sinks if s not in kept]
        old.close(self._shutdown_timeout(self.loaded))
        new.listener, new.sinks = listener, [*kept, *new.sinks]
        for view in kept:
            view.use_interval(settings.interval)
        try:
            new.jobs = job_tracker(new.settings, new.telemetry)
        except ConfigError as exc:
            log.error("reload: %s; running without job records until it is fixed", exc)
        new.attributor.start()
        new.xid.start()
        self.loaded, self.rt, self.runner = settings, new, self._make_runner(new)
        log.info("reload: configuration reloaded; sinks %s", ", ".join(s.name for s in new.sinks) or "none")
        return settings.interval
