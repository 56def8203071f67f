"""Two agents in one process render at once, each from its own caches: each writes its own golden.

What a schema keeps from cycle to cycle (families, label tuples) and what the Prometheus encoder
keeps (lines, family text) belong to the agent that renders (its :class:`Renderers`, its sinks'
encoders), so two agents in one process (tests, a reload beside the old runtime) cannot bleed
into each other: here two threads render two scenarios of the same node name, cycle by cycle in
step, several rounds over each scenario's cycles (so every cache meets changes both ways), and
every block is the scenario's golden block.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from falcon_gpu.schemas import registry
from falcon_gpu.schemas.render import RenderedCycle, Renderers
from falcon_gpu.schemas.selection import EVERYTHING
from falcon_gpu.sinks.encoding import prom_text
from tests.golden import regen

ROUNDS = 4


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Threads switch far more often than by default, so the two renders interleave finely."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def golden_blocks(name: str, schema: str) -> list[str]:
    return [
        f"# cycle {block}"
        for block in (regen.GOLDEN / name / f"{schema}.prom").read_text().split("# cycle ")[1:]
    ]


@pytest.mark.usefixtures("busy_switching")
def test_two_agents_rendering_at_once_each_write_their_own_golden() -> None:
    names = ("mixed-4gpu", "mig-node")
    cycles = {name: regen.cycles_of(name) for name in names}
    step = threading.Barrier(len(names), timeout=30)
    written: dict[str, dict[str, list[str]]] = {}
    failed: list[BaseException] = []

    def agent(name: str) -> None:
        renderers = Renderers()  # what one agent's cycle runner holds
        texts = {schema: prom_text.SeriesText() for schema in registry.NAMES}  # its sinks' encoders
        out: dict[str, list[str]] = {schema: [] for schema in registry.NAMES}
        try:
            for _ in range(ROUNDS):
                for i, cycle in enumerate(cycles[name]):
                    step.wait()
                    rendered = RenderedCycle(cycle, registry.DEFAULT, EVERYTHING, renderers)
                    for schema in registry.NAMES:
                        text = prom_text.encode(rendered.prometheus_in(schema), texts[schema])
                        out[schema].append(f"# cycle {i}\n{text}")
        except BaseException as exc:  # reported below, with the other agent's result
            failed.append(exc)
            step.abort()
        written[name] = out

    threads = [threading.Thread(target=agent, args=(name,)) for name in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failed, failed
    for name in names:
        for schema in registry.NAMES:
            want = golden_blocks(name, schema)
            got = written[name][schema]
            assert len(got) == ROUNDS * len(want)
            for k, block in enumerate(got):
                assert block == want[k % len(want)], (
                    f"{name} {schema}: round {k // len(want)}, cycle {k % len(want)}"
                )
