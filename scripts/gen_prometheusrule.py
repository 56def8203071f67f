#!/usr/bin/env python3
"""Write conf/kubernetes/components/prometheus-operator/prometheusrule.yaml from conf/prometheus.

Why generated: the rule files in conf/prometheus/ (``RULE_FILES``) are what promtool checks and
unit-tests and what a plain Prometheus loads; the Prometheus Operator wants the same groups inside a
PrometheusRule object. Copied by hand the two drift apart. The groups are copied as text (comments and layout
kept, so the object reads like the files), indented under ``spec.groups``;
tests/deploy/test_kubernetes.py fails when the committed file differs from what this writes, and
checks that its groups equal the files' groups and pass ``promtool check rules``.

Usage: python scripts/gen_prometheusrule.py [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULE_FILES = ("recording.yml", "alerts.yml", "stragglers.yml")
"""The shipped rule files, in the order a Prometheus loads them (every other list of them reads this)."""
SOURCES = tuple(ROOT / "conf" / "prometheus" / name for name in RULE_FILES)
OUT = ROOT / "conf" / "kubernetes" / "components" / "prometheus-operator" / "prometheusrule.yaml"

HEADER = """\
# Written by scripts/gen_prometheusrule.py from conf/prometheus/ (recording.yml, alerts.yml,
# stragglers.yml): edit those and rerun it (tests/deploy/test_kubernetes.py fails when this differs).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: falcon-gpu
  namespace: falcon-gpu
  labels:
    app.kubernetes.io/name: falcon-gpu
spec:
  groups:
"""


def groups_text(source: Path) -> str:
    """The file's header comments and its ``groups:`` list, indented to sit under ``spec.groups``."""
    lines = source.read_text().splitlines()
    if lines.count("groups:") != 1:
        raise SystemExit(f"{source}: expected one top-level `groups:` line followed by a block list")
    at = lines.index("groups:")
    head, body = lines[:at], lines[at + 1 :]
    if any(line and not line.startswith("#") for line in head):
        raise SystemExit(f"{source}: only comments may come before `groups:`")
    if any(line and not line.startswith("  ") for line in body):
        raise SystemExit(f"{source}: every line after `groups:` must be indented (one block list)")
    out = [f"    # ---- {source.relative_to(ROOT)} ----"]
    out += ["    " + line if line else "" for line in head]
    out += ["  " + line if line else "" for line in body]
    return "\n".join(out) + "\n"


def render() -> str:
    return HEADER + "".join(groups_text(source) for source in SOURCES)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file differs")
    args = parser.parse_args()
    text = render()
    if not args.check:
        OUT.write_text(text)
        return 0
    if not OUT.exists() or OUT.read_text() != text:
        print(
            f"out of date: {OUT.relative_to(ROOT)}; run python scripts/gen_prometheusrule.py", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
