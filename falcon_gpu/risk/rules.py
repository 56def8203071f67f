"""The recording rules of the risk score, written from :data:`falcon_gpu.risk.table.REASONS`.

Why rules and not a series the agent sends: the reasons are trends (errors per hour, XIDs per
day, share of the hour throttled) and the store already keeps the history they need, across
agent restarts and for every node at once; an agent would have to keep a day of samples per GPU
and lose it on every restart. ``doctor`` computes the same reasons from the cycles it holds
(:mod:`falcon_gpu.risk.score`). Each rule is robust to absent series (a lean profile that sends a
health series only while it is not 0): a reason whose input is missing is simply not there, and
the score of a GPU with no reason is 0 from ``falcon_gpu_info``.
"""

from __future__ import annotations

from falcon_gpu.risk.table import GPU, REASONS, Reason

BEGIN = "  # -- BEGIN risk rules: written by scripts/gen_answer_rules.py from falcon_gpu/risk/table.py --"
END = "  # -- END risk rules --"

REASON_SERIES = "gpu:falcon_gpu_risk_reason:ratio"
SCORE_SERIES = "gpu:falcon_gpu_risk_score:ratio"


def _number(x: float) -> str:
    return f"{x:g}"


def _reason_rule(reason: Reason) -> list[str]:
    scaled = f"({reason.expr}) / {_number(reason.full)}" if reason.full != 1 else reason.expr
    scaled = f"clamp_max({scaled}, 1)"
    return [
        f"      # {reason.name} (weight {_number(reason.weight)}): {reason.help}",
        f"      - record: {REASON_SERIES}",
        "        labels:",
        f"          reason: {reason.name}",
        "        expr: |",
        f"          {_number(reason.weight)} * {scaled} > 0",
    ]


def group_text() -> str:
    """The ``falcon_gpu_risk`` group, between the markers, as it sits in recording.yml."""
    lines = [
        BEGIN,
        "  # One group of its own: the reasons first, then the score that sums them (rules in a group",
        "  # run in order). A reason's series is its part of the score (weight x how full it is) and",
        "  # exists only while it is above 0; the score is their sum capped at 1, 0 for a GPU with none.",
        "  - name: falcon_gpu_risk",
        "    rules:",
    ]
    for reason in REASONS:
        lines += _reason_rule(reason)
    lines += [
        f"      - record: {SCORE_SERIES}",
        "        expr: |",
        f"          clamp_max(sum by ({GPU}) ({REASON_SERIES}), 1)",
        f"          or max by ({GPU}) (0 * falcon_gpu_info)",
        END,
    ]
    return "\n".join(lines) + "\n"
