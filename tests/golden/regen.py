"""Golden output: every bundled scenario rendered in every schema, with a fixed clock.

For each scenario in ``falcon_gpu/simulator/scenarios/`` (and in ``tests/golden/_scenarios/``:
nodes the bundled ones do not cover, such as a workstation card with a fan) this runs the production
pieces a one-shot agent runs (the simulated NVML library and its XID events, the
NVML source, the simulated host with its PodResources gRPC server, the Attributor,
the health checks and the four schemas) for :data:`CYCLES` cycles at fixed
timestamps, and writes ``tests/golden/<scenario>/falcon_gpu.prom``, ``dcgm.prom``, ``nvidia_smi.prom``
(Prometheus text, one block per cycle; ``profile = "full"``), ``falcon_gpu.default.prom`` and
``dcgm.default.prom`` (the default profile, :mod:`falcon_gpu.schemas.profiles`; ``nvidia_smi`` and
Open-Falcon have no lean set, so one file each) and ``openfalcon.json`` (a list per cycle of
its items, one item per line so that diffs stay readable); ``test_golden.py`` compares
them byte for byte.

What varies from run to run is normalised before rendering, in the data, so all
the schemas see the same values: ``falcon_gpu_agent_cycle_seconds`` and
``falcon_gpu_agent_reader_seconds`` are set to 0 (they are wall times); the
``reader_success`` values stay real.

Regenerate after a deliberate output change, and review the diff:
``python -m tests.golden.regen`` (or ``scripts/regen_golden.sh``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from msgspec.structs import replace

from falcon_gpu.advice.book import AdviceBook
from falcon_gpu.attribution import AttributionSettings, Attributor
from falcon_gpu.health import HealthEvaluator
from falcon_gpu.jobs.records_file import JobLog
from falcon_gpu.jobs.state import StateFile
from falcon_gpu.jobs.tracker import JobTracker
from falcon_gpu.model.attribution import Attribution
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.telemetry import Telemetry, TelemetryView
from falcon_gpu.policies import PolicyConfig, PolicyEngine
from falcon_gpu.schemas import dcgm, falcon_gpu, nvidia_smi, openfalcon
from falcon_gpu.schemas.selection import MetricSelection
from falcon_gpu.settings import Settings
from falcon_gpu.simulator.node.layout import SimulatedHost
from falcon_gpu.simulator.scenario.parse import load_scenario
from falcon_gpu.sinks.encoding import prom_text
from falcon_gpu.sources.nvml.library import load_nvml
from falcon_gpu.sources.nvml.source import NvmlSource
from falcon_gpu.sources.nvml.xid import XidWatcher

GOLDEN = Path(__file__).resolve().parent
SCENARIOS = Path(__file__).resolve().parents[2] / "falcon_gpu" / "simulator" / "scenarios"
EXTRA = GOLDEN / "_scenarios"
CYCLES = 3
INTERVAL = 30
START = 1_700_000_000.0
NODE = "golden-node"
SINK = "stdout"
FILES = (
    "falcon_gpu.prom", "dcgm.prom", "openfalcon.json", "nvidia_smi.prom", "falcon_gpu.default.prom",
    "dcgm.default.prom",
)  # fmt: skip
DEFAULT = MetricSelection(profile="default")
"""``[metrics] profile = "default"`` with no patterns (the schemas' own default is the full set)."""
POLICIES = (PolicyConfig.model_validate({"name": "GpuHot", "temperature_above": 85}),)
"""One policy on every scenario, so the policy series have golden output (policy-node trips it)."""


def scenario_paths() -> dict[str, Path]:
    """Name -> file of every scenario with golden output: the bundled ones and the extra ones."""
    return {p.stem: p for folder in (SCENARIOS, EXTRA) for p in sorted(folder.glob("*.json"))}


def scenario_names() -> list[str]:
    return sorted(scenario_paths())


def _normalised(view: TelemetryView) -> TelemetryView:
    """Wall times -> 0, so that the output is the same on every machine and run."""
    readers = {name: (ok, 0.0) for name, (ok, _) in view.readers.items()}
    return replace(view, last_cycle_seconds=0.0, readers=readers)


CARBON_INTENSITY = {"job-node": 400.0}
"""A numeric ``carbon_intensity`` (gCO2e/kWh) for one scenario: its series is in that golden."""


def cycles_of(name: str) -> list[CycleData]:
    scenario = load_scenario(scenario_paths()[name])
    host = SimulatedHost(scenario.host, node=NODE) if scenario.host is not None else None
    paths = host.start() if host is not None else None
    now = [START]
    telemetry = Telemetry()
    telemetry.register_sink(SINK)
    telemetry.spool_bytes(SINK, 0)
    kube_api = paths.kube_api if paths is not None else None
    # A scenario without a host reads an empty node, never this machine's /proc, /var/lib/docker or
    # /etc/passwd: a real process that happens to have a scenario PID would change the output.
    nowhere = Path(tempfile.mkdtemp(prefix="golden-empty-node-"))
    settings = Settings(
        node=NODE,
        interval=INTERVAL,
        process_metrics=True,
        pod_requests=kube_api is not None,  # the scenario's API server lists its pods' GPU quotas
        **(
            {
                "proc_root": nowhere / "proc",
                "log_root": nowhere / "log",
                "kubelet_socket": nowhere / "kubelet.sock",
                "docker_root": nowhere / "docker",
                "containers_root": nowhere / "containers",
                "passwd_file": nowhere / "passwd",
            }
            if paths is None
            else {
                "proc_root": paths.proc_root,
                "log_root": paths.log_root,
                "kubelet_socket": paths.kubelet_socket,
                "docker_root": paths.docker_root,
                "containers_root": paths.containers_root,
                "passwd_file": paths.passwd_file,
            }
        ),
    )
    library = load_nvml(scenario)
    xid = XidWatcher(library, telemetry)
    source = NvmlSource(library, telemetry, clock=lambda: now[0], xid=xid)
    attributor = Attributor(
        AttributionSettings.of(settings, kube_api=kube_api), telemetry, clock=lambda: now[0]
    )
    health = HealthEvaluator()
    policies = PolicyEngine(POLICIES, node=NODE)
    jobs_dir = nowhere / "jobs"  # job records and right-sizing advice, as `run` keeps them
    jobs_dir.mkdir(parents=True)
    jobs = JobTracker(NODE, JobLog(jobs_dir), StateFile(jobs_dir), telemetry)
    advice = AdviceBook()
    out: list[CycleData] = []
    try:
        attributor.refresh_now()
        for cycle in range(CYCLES):
            now[0] = START + cycle * INTERVAL
            snapshot = source.collect(now[0])
            attribution = (attributor.attribute(snapshot) if snapshot.nvml_ok else None) or Attribution()
            reports = health.evaluate(snapshot)
            finished = jobs.observe(snapshot, attribution, reports).finished
            out.append(
                CycleData(
                    node=NODE,
                    step=INTERVAL,
                    snapshot=snapshot,
                    attribution=attribution,
                    health=reports,
                    policies=policies.evaluate(snapshot, reports, attribution),
                    telemetry=_normalised(telemetry.view()),
                    process_metrics=True,
                    carbon_intensity=CARBON_INTENSITY.get(name),
                    advice=advice.observe(snapshot, finished, jobs.running, source.mig_profiles),
                )
            )
            telemetry.cycle_done(0.0)
    finally:
        xid.stop()
        source.close()
        if host is not None:
            host.stop()
        shutil.rmtree(nowhere, ignore_errors=True)
    return out


@contextlib.contextmanager
def _no_settings_from_the_environment() -> Iterator[None]:
    """``FALCON_GPU_*`` variables would change the settings, and so the output."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("FALCON_GPU_")}
    try:
        yield
    finally:
        os.environ.update(saved)


def render(name: str) -> dict[str, str]:
    """File name -> content for one scenario."""
    with _no_settings_from_the_environment():
        cycles = cycles_of(name)
    fg, dc, of, ns, fg_lean, dc_lean = [], [], [], [], [], []
    # one agent's caches across its cycles, one per schema and profile (an agent renders one profile)
    kept = falcon_gpu.Caches(), dcgm.Caches(), nvidia_smi.Caches(), falcon_gpu.Caches(), dcgm.Caches()
    texts = tuple(prom_text.SeriesText() for _ in kept)
    for i, cycle in enumerate(cycles):
        fg.append(f"# cycle {i}\n" + prom_text.encode(falcon_gpu.render(cycle, kept=kept[0]), texts[0]))
        dc.append(f"# cycle {i}\n" + prom_text.encode(dcgm.render(cycle, kept=kept[1]), texts[1]))
        ns.append(f"# cycle {i}\n" + prom_text.encode(nvidia_smi.render(cycle, kept=kept[2]), texts[2]))
        fg_lean.append(
            f"# cycle {i}\n" + prom_text.encode(falcon_gpu.render(cycle, DEFAULT, kept[3]), texts[3])
        )
        dc_lean.append(f"# cycle {i}\n" + prom_text.encode(dcgm.render(cycle, DEFAULT, kept[4]), texts[4]))
        items = (json.dumps(item.as_json(), sort_keys=True) for item in openfalcon.render(cycle))
        of.append("[\n  " + ",\n  ".join(items) + "\n ]")
    return {
        "falcon_gpu.prom": "".join(fg),
        "dcgm.prom": "".join(dc),
        "openfalcon.json": "[\n " + ",\n ".join(of) + "\n]\n",
        "nvidia_smi.prom": "".join(ns),
        "falcon_gpu.default.prom": "".join(fg_lean),
        "dcgm.default.prom": "".join(dc_lean),
    }


def main() -> int:
    logging.basicConfig(level=logging.ERROR)
    names = scenario_names()
    for stale in sorted(GOLDEN.iterdir()):
        if stale.is_dir() and stale.name not in names and {p.name for p in stale.iterdir()} <= set(FILES):
            shutil.rmtree(stale)  # the golden output of a scenario that no longer exists
            print(f"removed {stale.relative_to(GOLDEN.parents[1])}")
    for name in names:
        folder = GOLDEN / name
        folder.mkdir(exist_ok=True)
        for file, text in render(name).items():
            (folder / file).write_text(text)
        print(f"wrote {folder.relative_to(GOLDEN.parents[1])}/{{{','.join(FILES)}}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
