"""Hypothesis strategies for hostile names: any code point (lone surrogates and control characters
included), the characters the wires treat specially, and very long values."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ = settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
"""Fast enough for every run of the suite (seconds per test); no example database written to the tree."""

ANY_CHAR = st.one_of(
    st.characters(codec=None, exclude_categories=()),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),  # hypothesis leaves surrogates out by default
    st.characters(max_codepoint=0x1F),
)
"""Every code point: surrogates (an undecodable byte, a JSON escape), controls, NUL, line separators."""
SPECIAL = st.sampled_from(
    [".", "..", "", "/", "a b", "a,b", "a_b", "a=b", "\n", "\r", '"', "\\", "\\n", "%2e", "\udcff", "\ud800",
     "\x00", "\u2028", "\ufffd", "{", "}", "#", "a\tb"]
)  # fmt: skip
NAMES = st.one_of(
    SPECIAL,
    st.text(ANY_CHAR, max_size=12),
    st.text(ANY_CHAR, min_size=200, max_size=300),
    st.lists(SPECIAL, min_size=2, max_size=5).map("".join),
)
"""A pod, namespace, container, process or model name as a host could hand it over."""

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(ANY_CHAR, max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(ANY_CHAR, max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
"""Any JSON value (NaN and the infinities too, as Python's json writes them)."""

PATHOLOGICAL = st.one_of(
    st.integers(1_000, 60_000).map(lambda n: "[" * n),
    st.integers(1_000, 60_000).map(lambda n: "{a=" * n),
    st.integers(4_400, 6_000).map(lambda n: "1" * n),
    st.sampled_from(["nan", "inf", "-inf", "NaN", "Infinity", "1e999", "-1e999"]),
)
"""Shapes that break decoders rather than validators: deep nesting, huge integers, non-finite numbers."""


def _toml_value(value: object) -> str:
    """``value`` as a TOML inline value (strings with JSON's escapes, which TOML shares)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return '""'


TOML_VALUES = st.recursive(
    st.booleans() | st.integers(-(10**20), 10**20) | st.floats() | NAMES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def toml_documents(draw: st.DrawFn, keys: list[str], sink_keys: list[str]) -> str:
    """A TOML file: known setting keys (and a stray one) with any values, and ``[[sinks]]`` tables."""
    top = draw(st.dictionaries(st.sampled_from(keys) | NAMES, TOML_VALUES, max_size=4))
    lines = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in top.items() if k != "sinks"]
    for _ in range(draw(st.integers(0, 2))):
        lines.append("[[sinks]]")
        lines.append(f"type = {_toml_value(draw(st.sampled_from(SINK_TYPES) | NAMES))}")
        table = draw(st.dictionaries(st.sampled_from(sink_keys), TOML_VALUES, max_size=4))
        lines += [f"{k} = {_toml_value(v)}" for k, v in table.items() if k != "type"]
    if draw(st.booleans()):
        lines.append(f"{json.dumps(draw(st.sampled_from(keys)))} = {draw(PATHOLOGICAL)}")
    return "\n".join(lines) + "\n"


SINK_TYPES = ["stdout", "remote_write", "pushgateway", "falcon_agent", "falcon_transfer"]
