"""The fast encoders checked against a reference: prometheus_client's parsers read every golden
scenario's every cycle, in every Prometheus schema, back into what the cycle holds.

``prom_text`` keeps text across cycles (per family, per series, per value) and ``openmetrics``
(``listen``'s second format) shares its escaping: a cached line that outlived its value, a label
escaped wrongly or a family header that does not match its series would read back as other
families, samples, labels or values here. The cycles are rendered and encoded as one agent does,
its caches kept from one cycle to the next. A counter reads back as prometheus_client models it:
the family without ``_total``, its samples with it (text format: a counter named without
``_total`` gets it added to its samples; OpenMetrics: such a counter is declared ``unknown``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import Any

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from falcon_gpu.listen import openmetrics
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.model.samples import PromBatch
from falcon_gpu.schemas import registry
from falcon_gpu.schemas.selection import EVERYTHING
from falcon_gpu.sinks.encoding import prom_text
from tests.golden import regen

Family = tuple[str, str, str, list[tuple[str, dict[str, str], Any]]]
"""(family name, type, help, [(sample name, labels, value)]): what a parser reads."""


@functools.cache
def cycles(name: str) -> list[CycleData]:
    return regen.cycles_of(name)


def _value(value: float) -> Any:
    return "NaN" if math.isnan(value) else float(value)  # NaN is never equal to itself


def held(batch: PromBatch, *, open_metrics: bool) -> list[Family]:
    """The families of ``batch`` as a parser should read them back."""
    out: list[Family] = []
    for f in batch.families:
        if not f.series:
            continue
        name, typ, sample = f.name, f.kind, f.name
        if f.kind == "counter" and f.name.endswith("_total"):
            name = f.name.removesuffix("_total")
        elif f.kind == "counter":
            typ, sample = ("unknown", f.name) if open_metrics else ("counter", f.name + "_total")
        out.append((name, typ, f.help, [(sample, dict(s.labels), _value(s.value)) for s in f.series]))
    return out


def read_back(families: Iterable[Any]) -> list[Family]:
    out: list[Family] = []
    for m in families:
        assert all(s.timestamp is None for s in m.samples), m.name
        out.append(
            (m.name, m.type, m.documentation, [(s.name, s.labels, _value(s.value)) for s in m.samples])
        )
    return out


@pytest.mark.parametrize("schema", registry.NAMES)
@pytest.mark.parametrize("name", regen.scenario_names())
def test_every_golden_cycle_reads_back_as_the_cycle_holds_it(name: str, schema: str) -> None:
    kept, text_cache = registry.new_caches(schema), prom_text.SeriesText()
    render = registry.renderer(schema)
    blocks = regen.GOLDEN.joinpath(name, f"{schema}.prom").read_text().split("# cycle ")[1:]
    assert len(blocks) == len(cycles(name)) == regen.CYCLES
    for i, cycle in enumerate(cycles(name)):
        batch = render(cycle, EVERYTHING, kept)
        text = prom_text.encode(batch, text_cache)
        assert blocks[i] == f"{i}\n{text}", "the text checked is the golden file's"
        assert read_back(parse_text(text)) == held(batch, open_metrics=False), f"cycle {i}"
        om = openmetrics.encode(batch)
        assert read_back(parse_openmetrics(om)) == held(batch, open_metrics=True), f"cycle {i}"


def test_the_reference_catches_a_wrong_value_a_wrong_label_and_a_wrong_help() -> None:
    """The comparison can fail: a line changed in each way reads back as something else."""
    batch = registry.renderer("falcon_gpu")(
        cycles("mixed-4gpu")[0], EVERYTHING, registry.new_caches("falcon_gpu")
    )
    text = prom_text.encode(batch)
    want = held(batch, open_metrics=False)
    line = next(ln for ln in text.splitlines() if ln.startswith("falcon_gpu_up{"))
    for wrong in (
        text.replace(line, line.rsplit(" ", 1)[0] + " 7", 1),
        text.replace(line, line.replace('gpu="0"', 'gpu="9"'), 1),
        text.replace("# HELP falcon_gpu_up 1 when", "# HELP falcon_gpu_up 2 when", 1),
    ):
        assert wrong != text
        assert read_back(parse_text(wrong)) != want
