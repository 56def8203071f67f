"""What ``run`` and ``plugin`` do, on top of :mod:`falcon_gpu.agent.runtime`."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from falcon_gpu.agent import outputs
from falcon_gpu.agent.cycle import CycleRunner
from falcon_gpu.agent.runtime import Runtime, build
from falcon_gpu.carbon import grams_per_kwh
from falcon_gpu.model.telemetry import Telemetry
from falcon_gpu.schemas.extra_labels import as_labels

if TYPE_CHECKING:  # the plugin's path never imports pydantic: Settings is only a type here
    from collections.abc import Sequence

    from falcon_gpu.advice.book import AdviceBook
    from falcon_gpu.schemas.render import RenderedCycle
    from falcon_gpu.settings import Settings
    from falcon_gpu.settings_resolved import ResolvedSettings
    from falcon_gpu.sinks.base import Sink

log = logging.getLogger(__name__)

PLUGIN_STEP = 60
FLUSH_TIMEOUT = 20.0
"""Seconds sinks get to deliver at shutdown; with the <= 10 s wait for a running cycle this fits
the 45 s terminationGracePeriodSeconds of conf/kubernetes/base/daemonset.yaml (what is left stays spooled)."""


def _advice_book(rt: Runtime) -> AdviceBook | None:
    """The running agent's right-sizing advice, where it keeps job records."""
    if rt.jobs is None:
        return None
    from falcon_gpu.advice.book import DEFAULT_WINDOW, AdviceBook
    from falcon_gpu.advice.placement import DEFAULT_HEADROOM

    s = rt.settings
    return AdviceBook(
        headroom=getattr(s, "advice_headroom", DEFAULT_HEADROOM),
        window=getattr(s, "advice_window", DEFAULT_WINDOW),
        recent=rt.jobs.recent(),
    )


def _runner(rt: Runtime, *, step: int, advice: bool = False) -> CycleRunner:
    s = rt.settings
    for problem in outputs.selection_warnings(s):
        log.warning("%s", problem)
    return CycleRunner(
        node=s.node,
        step=step,
        source=rt.source,
        attributor=rt.attributor,
        sinks=rt.sinks,
        telemetry=rt.telemetry,
        schema=s.schema_,
        sink_schemas=outputs.sink_schemas(s),
        selection=outputs.selection_of(s),
        process_metrics=s.process_metrics,
        labels=as_labels(s.labels),
        policies=rt.policies,
        jobs=rt.jobs,
        carbon_intensity=grams_per_kwh(s.carbon_intensity),
        advice=_advice_book(rt) if advice else None,
    )


def _prepare_one_shot(rt: Runtime) -> None:
    """A one-shot process has no background threads: refresh lookups synchronously."""
    try:
        rt.attributor.refresh_now()
    except Exception as exc:
        rt.telemetry.failing("attribution", "attribution", f"attribution refresh failed: {exc!r}")


def dropped_report(telemetry: Telemetry) -> list[str]:
    """One line per sink that dropped samples (refused, invalid or lost), for ``run --once``."""
    samples = telemetry.view().samples_total
    return [
        f"falcon-gpu: sink {sink}: {n} samples dropped (refused or invalid; see the warnings above)"
        for (sink, outcome), n in sorted(samples.items())
        if outcome == "dropped" and n > 0
    ]


def undelivered_report(sinks: Sequence[Sink]) -> list[str]:
    """One line per latest-state sink whose newest cycle was lost, for ``run --once``."""
    return [f"falcon-gpu: sink {sink.name}: {why}" for sink in sinks if (why := sink.undelivered())]


def nvml_report(rendered: RenderedCycle) -> list[str]:
    """The line for a one-shot cycle that had no NVML: its output holds no GPU at all."""
    snapshot = rendered.cycle.snapshot
    if snapshot.nvml_ok:
        return []
    return [f"falcon-gpu: no GPU was read: {snapshot.nvml_error or 'NVML did not start'}"]


def _one_shot_sinks(settings: Settings) -> Settings:
    """``run --once`` (a cron job, a test) leaves its series to the store's lookback: staleness
    markers at its exit would hide every value until the next run. A sink that sets
    ``stale_on_shutdown`` itself keeps its choice."""
    sinks = [
        cfg.model_copy(update={"stale_on_shutdown": False})
        if "stale_on_shutdown" in type(cfg).model_fields and "stale_on_shutdown" not in cfg.model_fields_set
        else cfg
        for cfg in settings.sinks
    ]
    if all(new is old for new, old in zip(sinks, settings.sinks, strict=True)):
        return settings  # unchanged: the sinks stay as the user gave them, or the default
    return settings.model_copy(update={"sinks": sinks})


def shutdown_timeout(settings: Settings) -> float:
    """Seconds the sinks get to deliver at shutdown (and at a reload): the longest sink ``timeout``,
    one request's worth, so a receiver that accepts and never answers holds a shutdown up for
    ``timeout`` + about a second, not :data:`FLUSH_TIMEOUT`; what is not sent stays spooled.
    Without network sinks (only alert receivers), :data:`FLUSH_TIMEOUT`."""
    timeouts = [float(t) for c in settings.sinks if isinstance(t := getattr(c, "timeout", None), int | float)]
    return min(FLUSH_TIMEOUT, max(timeouts)) if timeouts else FLUSH_TIMEOUT


def run(
    settings: Settings,
    *,
    simulate: str | None,
    once: bool,
    reload_settings: Callable[[], Settings] | None = None,
) -> int:
    """``reload_settings``: how SIGHUP loads the configuration again (None: SIGHUP keeps its default)."""
    rt = build(
        _one_shot_sinks(settings) if once else settings,
        simulate=simulate,
        with_jobs=True,
        listen=True,
        one_shot=once,
    )
    stuck = closed = False
    running = None
    try:
        if once:
            _prepare_one_shot(rt)
            rendered = _runner(rt, step=max(1, round(settings.interval)), advice=True).run()
            rt.close(FLUSH_TIMEOUT)  # delivers, or leaves spooled when a server is failing
            closed = True
            lines = nvml_report(rendered) + dropped_report(rt.telemetry) + undelivered_report(rt.sinks)
            for line in lines:
                print(line, file=sys.stderr)
            return 1 if lines else 0
        from falcon_gpu.agent.loop import run_every, settle_heap
        from falcon_gpu.agent.reload import Running
        from falcon_gpu.agent.signals import install_signals

        stop, reload = threading.Event(), threading.Event()
        install_signals(stop, reload if reload_settings is not None else None)
        rt.attributor.start()
        rt.xid.start()
        running = Running(
            settings,
            rt,
            lambda r: _runner(r, step=max(1, round(r.settings.interval)), advice=True),
            shutdown_timeout,
        )
        settle_heap()
        log.info(
            "falcon-gpu running on node %s every %gs with sinks %s",
            settings.node,
            settings.interval,
            ", ".join(s.name for s in rt.sinks) or "none",
        )
        on_reload = None
        if reload_settings is not None:
            load, current = reload_settings, running

            def on_reload() -> float:
                return current.reload(load, simulate=simulate)

        stuck = not run_every(
            settings.interval, running.cycle, rt.telemetry, stop, reload=reload, on_reload=on_reload
        )
        return 0
    finally:
        if running is not None:
            rt, settings = running.rt, running.loaded
        if not closed:
            rt.close(shutdown_timeout(settings) if running is not None else FLUSH_TIMEOUT, nvml=not stuck)
        if stuck:
            _exit_leaving_the_stuck_cycle()


def _exit_leaving_the_stuck_cycle() -> None:
    """Sinks are closed; the cycle's worker thread (not a daemon) would keep the
    interpreter from exiting until NVML answers, so leave without joining it."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def plugin(settings: Settings | ResolvedSettings, *, simulate: str | None) -> int:
    """Print exactly one JSON array; exit 0 even when GPUs fail (falcon-agent drops
    everything from a non-zero exit)."""
    items: list[dict[str, object]] = []
    try:
        # job records in the plugin only when asked for: it runs every minute under falcon-agent,
        # often as a user who cannot write the default jobs_dir
        rt = build(
            settings,
            simulate=simulate,
            with_sinks=False,
            with_jobs="jobs_dir" in settings.explicit,
            one_shot=True,
        )
        try:
            _prepare_one_shot(rt)
            rendered = _runner(rt, step=PLUGIN_STEP).run()
            items = [i.as_json() for i in rendered.falcon]
        finally:
            rt.close(1.0)
    except Exception as exc:
        if type(exc).__name__ in ("ScenarioError", "ConfigError"):
            raise
        log.error("plugin: %r; printing what was collected", exc)
    print_items(items)
    return 0


def print_items(items: list[dict[str, object]]) -> None:
    """The plugin's whole stdout: exactly one JSON array."""
    sys.stdout.write(json.dumps(items, separators=(",", ":")) + "\n")
    sys.stdout.flush()
