#!/bin/sh
# Regenerate tests/golden/ from the bundled scenarios (see tests/golden/regen.py); review the diff.
set -eu
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" -m tests.golden.regen "$@"
