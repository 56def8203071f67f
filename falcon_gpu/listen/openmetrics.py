"""OpenMetrics 1.0 text, for scrapers that negotiate it (Prometheus does by default).

It differs from the 0.0.4 text format where it matters here: a counter's
``# TYPE`` line names the family without its ``_total`` suffix (a counter whose
name lacks it, as some dcgm-exporter names do, is declared ``unknown`` instead),
``# HELP`` also escapes double quotes, and the exposition ends with ``# EOF``.
"""

from __future__ import annotations

from falcon_gpu.model.samples import Family, PromBatch
from falcon_gpu.sinks.encoding.prom_text import escape_label_value, format_value

CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def _family_header(family: Family) -> tuple[str, str]:
    """(family name, type) as the ``# TYPE`` line states them."""
    if family.kind == "counter":
        if family.name.endswith("_total"):
            return family.name.removesuffix("_total"), "counter"
        return family.name, "unknown"
    return family.name, "gauge"


def encode_family(family: Family) -> str:
    name, kind = _family_header(family)
    lines = [f"# HELP {name} {escape_label_value(family.help)}", f"# TYPE {name} {kind}"]
    for s in family.series:
        inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in s.labels)
        labels = f"{{{inner}}}" if inner else ""
        lines.append(f"{family.name}{labels} {format_value(s.value)}")
    return "\n".join(lines) + "\n"


def encode(batch: PromBatch) -> str:
    return "".join(encode_family(f) for f in batch.families if f.series) + "# EOF\n"
