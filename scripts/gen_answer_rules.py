#!/usr/bin/env python3
"""Write the generated rule groups (GPUs at risk; energy and carbon) into conf/prometheus/recording.yml.

Why generated: the risk weights and full levels are declared once, in falcon_gpu/risk/table.py,
which ``falcon-gpu doctor`` reads too (copied by hand, the store's score and doctor's would drift
apart), and the carbon rules are one pattern over windows and levels (falcon_gpu/carbon/rules.py).
Only the blocks between each BEGIN/END pair of markers are rewritten (appended when missing);
tests/risk and tests/carbon fail when they differ from what this writes. Rerun
scripts/gen_prometheusrule.py after it.

Usage: python scripts/gen_answer_rules.py [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from falcon_gpu.carbon import rules as carbon_rules  # noqa: E402
from falcon_gpu.risk import rules as risk_rules  # noqa: E402

OUT = ROOT / "conf" / "prometheus" / "recording.yml"
BLOCKS = (
    (risk_rules.BEGIN, risk_rules.END, risk_rules.group_text),
    (carbon_rules.BEGIN, carbon_rules.END, carbon_rules.group_text),
)


def splice(text: str, begin: str, end: str, block: str) -> str:
    """``text`` with the lines from ``begin`` to ``end`` replaced by ``block``, or ``block`` appended."""
    if begin in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end + "\n", 1)
        return head + block + tail
    return text.rstrip("\n") + "\n\n" + block


def render(text: str) -> str:
    for begin, end, write in BLOCKS:
        text = splice(text, begin, end, write())
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file differs")
    args = parser.parse_args()
    text = OUT.read_text()
    wanted = render(text)
    if args.check:
        if wanted != text:
            print(f"out of date: {OUT.relative_to(ROOT)}; run scripts/gen_answer_rules.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
