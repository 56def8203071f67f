#!/usr/bin/env python3
"""Write the risk rules (the ``falcon_gpu_risk`` group) into conf/prometheus/recording.yml.

Why generated: the weights and full levels are declared once, in falcon_gpu/risk/table.py, which
``falcon-gpu doctor`` reads too; copied by hand, the store's score and doctor's would drift apart.
Only the block between the BEGIN/END markers is rewritten; tests/risk/test_risk_rules.py fails
when it differs from what this writes. Rerun scripts/gen_prometheusrule.py after it.

Usage: python scripts/gen_risk_rules.py [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from falcon_gpu.risk.rules import splice  # noqa: E402

OUT = ROOT / "conf" / "prometheus" / "recording.yml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file differs")
    args = parser.parse_args()
    text = OUT.read_text()
    wanted = splice(text)
    if args.check:
        if wanted != text:
            print(f"out of date: {OUT.relative_to(ROOT)}; run scripts/gen_risk_rules.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
