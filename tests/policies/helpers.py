"""Run the real cycle on the ``policy-node`` scenario with a policy engine and a clock we drive."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from falcon_gpu.agent.cycle import CycleRunner
from falcon_gpu.agent.runtime import build
from falcon_gpu.policies import Alert, PolicyConfig, PolicyEngine
from falcon_gpu.schemas.render import RenderedCycle
from falcon_gpu.settings import load_settings

HOT = "GPU-5a1c7e2b-9d3f-4e8a-b6c1-0f2e3d4c5b6a"
"""GPU 0 of policy-node: 91 °C in cycles 2-7, XID 79 in cycle 3, 2 uncorrected ECC errors in cycles 4-6;
trainer-0 (namespace ml) runs on it."""
FLAPPY = "GPU-6b2d8f3c-0e4a-4f9b-c7d2-1a3f4e5d6c7b"
"""GPU 1: 91 °C in cycles 1, 3 and 5 only; 750 W in cycles 3-6; PCIe replays +50 a cycle in cycles 3-6."""


@dataclass
class Recorder:
    """A notifier that keeps every alert the engine hands over."""

    alerts: list[Alert] = field(default_factory=list)

    def update(self, alert: Alert) -> None:
        self.alerts.append(alert)

    def close(self, timeout: float) -> None:
        pass


@dataclass
class Run:
    runner: CycleRunner
    recorder: Recorder
    clock: list[float]
    """[monotonic, wall] seconds of the next cycle."""

    def cycle(self, at: float, *, wall_step: float = 0.0) -> RenderedCycle:
        """A cycle at monotonic ``at``; the wall clock reads ``at + wall_step`` (a stepped clock)."""
        self.clock[:] = [at, at + wall_step]
        return self.runner.run()


@contextmanager
def policy_run(tmp_path: Path, *policies: dict[str, Any]) -> Iterator[Run]:
    """Cycle ``n`` of the scenario runs at the time the caller gives it (``Run.cycle``)."""
    settings = load_settings(None, spool_dir=tmp_path / "spool", node="policy-node")
    rt = build(settings, simulate="policy-node", with_sinks=False)
    try:
        rt.attributor.refresh_now()
        recorder = Recorder()
        engine = PolicyEngine(
            [PolicyConfig.model_validate(p) for p in policies], node="policy-node", notifiers=[recorder]
        )
        clock = [0.0, 0.0]
        runner = CycleRunner(
            node="policy-node",
            step=1,
            source=rt.source,
            attributor=rt.attributor,
            sinks=[],
            telemetry=rt.telemetry,
            policies=engine,
            first_attribution_wait=0,
            clock=lambda: clock[1],
            monotonic=lambda: clock[0],
        )
        yield Run(runner, recorder, clock)
    finally:
        rt.close(1.0)


def violation(rendered: RenderedCycle, policy: str, uuid: str) -> tuple[float, float] | None:
    """(violation gauge, violations_total) of ``policy`` on ``uuid`` in this cycle; None when absent."""
    values: dict[str, float] = {}
    for family in rendered.prometheus.families:
        if family.name in ("falcon_gpu_policy_violation", "falcon_gpu_policy_violations_total"):
            for s in family.series:
                lb = dict(s.labels)
                if lb.get("policy") == policy and lb.get("uuid") == uuid:
                    values[family.name] = s.value
    if not values:
        return None
    return values["falcon_gpu_policy_violation"], values["falcon_gpu_policy_violations_total"]
