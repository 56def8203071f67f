"""Build every long-lived part from the settings, and close them in a safe order.

The simulator replaces only the NVML library; when its scenario describes a
host (proc tree, logs, kubelet, API server pods) and the user set none of those
paths, the host is laid out in a temporary directory and attribution is pointed
at it (``pod_labels`` / ``pod_requests`` at its loopback API server), so the
real readers run. Shutdown order: stop the ``listen`` endpoint, the XID thread
and attribution refreshers first (they serve or feed the cycle), then flush and
close sinks (so queued and spooled data gets its chance), then NVML, then the
simulated host.

Sinks close side by side under one deadline: one after the other, N slow sinks
would take N times ``timeout`` and outlast the kubelet's 30 s grace period, so
the SIGKILL would land before NVML and the host were closed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.schemas.extra_labels import as_labels
from falcon_gpu.settings_resolved import ResolvedSettings
from falcon_gpu.settings_sources import ConfigError
from falcon_gpu.sinks.base import Sink

if TYPE_CHECKING:  # the plugin's path never imports pydantic (the settings and policy models)
    import tempfile

    from falcon_gpu.attribution import Attributor
    from falcon_gpu.delivery.redactor import LogRedactor
    from falcon_gpu.jobs.tracker import JobTracker
    from falcon_gpu.listen.server import ListenServer
    from falcon_gpu.policies.engine import PolicyEngine
    from falcon_gpu.settings import Settings
    from falcon_gpu.simulator.node.layout import SimulatedHost
    from falcon_gpu.sources.nvml.source import NvmlSource
    from falcon_gpu.sources.nvml.xid import XidWatcher

log = logging.getLogger(__name__)

HOST_PATHS = ("proc_root", "kubelet_socket", "log_root", "docker_root", "containers_root", "passwd_file")
"""The settings that point at the host's files: a simulated host lays out each (``HostPaths``) unless
the user set one."""


class Runtime:
    """The agent's parts, built by :func:`build` (a plain class: nothing generated at import)."""

    __slots__ = (
        "attributor", "host", "jobs", "library", "listener", "policies", "redactor", "scratch", "settings",
        "sinks",
        "source", "telemetry", "xid",
    )  # fmt: skip

    def __init__(
        self,
        settings: Settings | ResolvedSettings,
        telemetry: Telemetry,
        library: Any,
        source: NvmlSource,
        xid: XidWatcher,
        attributor: Attributor,
        sinks: list[Sink] | None = None,
        host: SimulatedHost | None = None,
        policies: PolicyEngine | None = None,
        jobs: JobTracker | None = None,
        listener: ListenServer | None = None,
        scratch: tempfile.TemporaryDirectory[str] | None = None,
        redactor: LogRedactor | None = None,
    ) -> None:
        self.settings = settings
        """``ResolvedSettings`` for the plugin: no sinks, policies or listen endpoint."""
        self.telemetry = telemetry
        self.library = library
        """pynvml, or the simulator standing in for it (an untyped module either way)."""
        self.source = source
        self.xid = xid
        self.attributor = attributor
        self.sinks: list[Sink] = [] if sinks is None else sinks
        self.host = host
        self.policies = policies
        self.jobs = jobs
        self.listener = listener
        self.scratch = scratch
        """A simulated node's spool and job records (removed at close): never a real node's paths."""
        self.redactor = redactor
        """On the log handlers while this runtime lives (see :mod:`falcon_gpu.delivery.redactor`)."""

    def scrub(self, text: str) -> str:
        """``text`` without the configured secrets: for what a command prints rather than logs."""
        return self.redactor.scrub(text) if self.redactor is not None else text

    def close(self, timeout: float = 10.0, *, nvml: bool = True) -> None:
        """``nvml=False``: leave NVML alone (a cycle is stuck inside it; nvmlShutdown would
        wait on the same driver lock)."""
        for name, fn in (  # None: a test's runtime without that part
            ("listen", self.listener.close if self.listener else None),
            ("xid", self.xid.stop if self.xid else None),
            ("attribution", self.attributor.close if self.attributor else None),
        ):
            _quietly(name, fn)
        _quietly("job records", self.jobs.close if self.jobs else None)
        closing: list[tuple[str, Callable[[float], None]]] = [(f"sink {s.name}", s.close) for s in self.sinks]
        if self.policies is not None:  # resolutions and new firings get the same deadline as data
            closing.append(("policy alerts", self.policies.close))
        _close_all(closing, timeout)
        if nvml:
            _quietly("nvml", self.source.close if self.source else None)
        if self.host is not None:
            _quietly("simulated host", self.host.stop)
        if self.scratch is not None:
            _quietly("simulated node's spool", self.scratch.cleanup)
        if self.redactor is not None:  # last: closing parts log too
            self.redactor.uninstall()


def _close_all(parts: list[tuple[str, Callable[[float], None]]], timeout: float) -> None:
    """Close every part (sinks, alert senders) in its own thread; return by ``timeout`` (+1 s)
    even if one hangs."""
    deadline = time.monotonic() + timeout + 1.0
    threads = [
        threading.Thread(
            target=_quietly,
            args=(what, lambda close=close: close(timeout)),
            name=f"falcon-gpu-close-{what}",
            daemon=True,
        )
        for what, close in parts
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            log.warning("%s did not finish closing in %gs; exiting anyway (its spool keeps the data)",
                        t.name.removeprefix("falcon-gpu-close-"), timeout)  # fmt: skip


def _quietly(what: str, fn: Callable[[], object] | None) -> None:
    if fn is None:
        return
    try:
        fn()
    except Exception as exc:  # shutdown must finish even if one part misbehaves
        log.warning("closing %s failed: %r", what, exc)


def build(
    settings: Settings | ResolvedSettings,
    *,
    simulate: str | None,
    with_sinks: bool = True,
    telemetry: Telemetry | None = None,
    with_jobs: bool = False,
    listen: bool = False,
    one_shot: bool = False,
) -> Runtime:
    """Raises ScenarioError (bad scenario) and ConfigError/ValueError (bad sink, unusable
    ``spool_dir`` or, ``with_jobs``, ``jobs_dir``) before anything runs.

    ``one_shot``: the command runs one cycle and ends (NVML failing to start is said without the
    retry schedule of the running agent).

    ``listen``: also bind and serve the ``listen`` endpoint when it is set (only ``run`` does:
    ``doctor`` beside a running agent must not fight it for the port)."""
    from falcon_gpu.sources.nvml.library import load_nvml
    from falcon_gpu.sources.nvml.source import NvmlSource
    from falcon_gpu.sources.nvml.xid import XidWatcher

    telemetry = telemetry or Telemetry()
    scenario = None
    host = None
    kube_api = None
    scratch = None
    if simulate is not None:
        from falcon_gpu.simulator.scenario.parse import load_scenario, resolve_scenario

        scenario = load_scenario(resolve_scenario(simulate))
        settings, scratch = _simulated_node_paths(settings)
        if scenario.host is not None and not (settings.explicit & set(HOST_PATHS)):
            from falcon_gpu.simulator.node.layout import SimulatedHost

            host = SimulatedHost(scenario.host, node=settings.node)
            paths = host.start()
            kube_api = paths.kube_api  # its API server, for pod_labels / pod_requests
            settings = settings.model_copy(update={name: getattr(paths, name) for name in HOST_PATHS})
    sinks: list[Sink] = []
    listener = None
    full = None if isinstance(settings, ResolvedSettings) else settings  # the plugin's have no outputs
    redactor = _redactor(full) if full is not None else None
    try:
        jobs = job_tracker(settings, telemetry) if with_jobs else None
        if listen and full is not None and full.listen:
            from falcon_gpu.listen import LatestCycle, open_listener

            latest = LatestCycle(full.interval)
            listener = open_listener(
                full.listen,
                latest,
                max_connections=full.listen_max_connections,
                web_config_file=full.web_config_file,
                telemetry=telemetry,
            )
            sinks.append(latest)
        if with_sinks and full is not None:
            from falcon_gpu.sinks.registry import build_sink

            for cfg in _sink_configs(full, one_shot=one_shot):
                try:
                    sink = build_sink(
                        cfg,
                        node=full.node,
                        spool_dir=full.spool_dir,
                        spool_max_bytes=full.spool_max_bytes,
                        telemetry=telemetry,
                    )
                except OSError as exc:  # the spool directory cannot be made or used
                    raise ConfigError(f"setting 'spool_dir': {exc.strerror or exc}") from None
                sinks.append(sink)
        library = load_nvml(scenario)
        xid = XidWatcher(library, telemetry)
        source = NvmlSource(library, telemetry, xid=xid, one_shot=one_shot)
        from falcon_gpu.attribution import AttributionSettings, Attributor

        attributor = Attributor(AttributionSettings.of(settings, kube_api=kube_api), telemetry)
        # alerts are an output too
        policies = _policy_engine(full, telemetry) if with_sinks and full is not None else None
    except BaseException:
        if listener is not None:
            listener.close()
        _close_all([(f"sink {s.name}", s.close) for s in sinks], 1.0)
        if host is not None:
            host.stop()
        if scratch is not None:
            scratch.cleanup()
        if redactor is not None:
            redactor.uninstall()
        raise
    if listener is not None:
        listener.start()
    return Runtime(
        settings,
        telemetry,
        library,
        source,
        xid,
        attributor,
        sinks,
        host,
        policies,
        jobs,
        listener,
        scratch=scratch,
        redactor=redactor,
    )


SimulatedPaths = tuple["Settings | ResolvedSettings", "tempfile.TemporaryDirectory[str] | None"]


def _simulated_node_paths(settings: Settings | ResolvedSettings) -> SimulatedPaths:
    """A simulated node keeps its spool and job records in a temporary directory unless the user
    set ``spool_dir`` / ``jobs_dir``: run as root on a real GPU node, ``--simulate`` must not put
    simulated jobs into ``/var/lib/falcon-gpu/jobs``, where ``falcon-gpu stats`` would mix them
    with real ones, nor simulated cycles into a real sink's spool."""
    own = (
        {"jobs_dir"} if isinstance(settings, ResolvedSettings) else {"spool_dir", "jobs_dir"}
    )  # plugin: no spool
    unset = sorted(own - settings.explicit)
    if not unset:
        return settings, None
    import tempfile  # not on the plugin's path: only a simulated node needs it

    scratch = tempfile.TemporaryDirectory(prefix="falcon-gpu-simulated-")
    update = {name: Path(scratch.name) / name.removesuffix("_dir") for name in unset}
    log.debug("simulated node: %s under %s (removed at exit)", " and ".join(unset), scratch.name)
    return settings.model_copy(update=update), scratch


def _sink_configs(settings: Settings, *, one_shot: bool) -> list[Any]:
    """The configured sinks; with none configured, stdout, said once (so that a user who adds a
    real sink knows stdout goes away with it) — except for a running agent that ``listen`` serves:
    scraped, it must not also write ~45 KB a cycle to the journal. Decided here, where every
    runtime is built (``run``, a SIGHUP reload, ``doctor``), not by each caller."""
    if "sinks" in settings.explicit:
        return list(settings.sinks)
    if settings.listen and not one_shot:
        return []
    log.info("no sinks configured: each cycle is written to stdout ([[sinks]] or listen replace it)")
    return list(settings.sinks)


def _redactor(settings: Settings) -> LogRedactor:
    """Built from the settings' secrets and on the log handlers before any part that may log one."""
    from falcon_gpu.delivery.redactor import LogRedactor
    from falcon_gpu.delivery.secrets import url_secrets
    from falcon_gpu.sinks.config import sink_secrets

    values, files = sink_secrets(settings.sinks)
    for policy in settings.policies:
        for url in (*policy.alertmanager, *([policy.webhook] if policy.webhook else [])):
            values += url_secrets(url)
    redactor = LogRedactor(values, files)
    redactor.install()
    return redactor


def _policy_engine(settings: Settings, telemetry: Telemetry) -> PolicyEngine | None:
    if not settings.policies:
        return None
    from falcon_gpu.policies.engine import PolicyEngine
    from falcon_gpu.policies.notify import AlertNotifier

    return PolicyEngine(
        settings.policies,
        node=settings.node,
        extra_labels=as_labels(settings.labels),
        notifiers=[AlertNotifier(telemetry)],
    )


def job_tracker(settings: Settings | ResolvedSettings, telemetry: Telemetry) -> JobTracker | None:
    """Raises ConfigError naming ``jobs_dir`` when one the user set cannot be created or written;
    the default one (``/var/lib/…``, not writable for a user trying the agent out) only costs the
    job records, with a warning."""
    from falcon_gpu.carbon import grams_per_kwh
    from falcon_gpu.jobs.records_file import JobLog, prepare_dir
    from falcon_gpu.jobs.state import StateFile
    from falcon_gpu.jobs.tracker import JobTracker

    try:
        prepare_dir(settings.jobs_dir)
    except OSError as exc:
        reason = f"{settings.jobs_dir}: {exc.strerror or exc}"
        if "jobs_dir" in settings.explicit:
            raise ConfigError(f"setting 'jobs_dir': {reason}") from None
        log.warning("no job records: the default jobs_dir %s; set jobs_dir to a writable directory", reason)
        return None
    return JobTracker(
        settings.node,
        JobLog(settings.jobs_dir),
        StateFile(settings.jobs_dir),
        telemetry,
        carbon_intensity=grams_per_kwh(settings.carbon_intensity),
    )
