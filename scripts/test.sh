#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run all of them:
# the real servers from Debian (Prometheus, Pushgateway, VictoriaMetrics,
# Alertmanager, Go for the Open-Falcon transfer peer, tmux for `top`, systemd-analyze
# for the unit file, faketime for wall-clock steps, podman and mmdebstrap to build the Dockerfile
# from a local Debian base: as root nothing more, no uidmap, fuse-overlayfs or slirp4netns), a virtualenv with the
# package and its test tools, ruff, mypy, and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pair in prometheus:prometheus prometheus-pushgateway:prometheus-pushgateway \
            victoria-metrics:victoria-metrics prometheus-alertmanager:prometheus-alertmanager go:golang-go \
            tmux:tmux systemd-analyze:systemd faketime:faketime podman:podman mmdebstrap:mmdebstrap; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need_apt+=("${pair#*:}")
done
if ((${#need_apt[@]})); then
  echo "== installing from Debian: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV"
  python3 -m venv "$VENV"
fi
echo "== installing falcon-gpu and test tools"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
"$VENV/bin/python" -m pip install -q -e '.[test]'
export PATH="$PWD/$VENV/bin:$PATH"

echo "== ruff"
ruff check falcon_gpu tests scripts plugins
ruff format --check falcon_gpu tests scripts plugins
echo "== mypy"
mypy falcon_gpu
echo "== pytest"
set +e
# A test that fails is run again, up to twice (pytest-rerunfailures), and listed as a rerun ("R") in
# the summary, named under "rerun test summary info": the suite starts real servers, agents and tmux panes on 2 shared cores, and a load spike
# once in a while misses a deadline. A test that fails three times fails the run.
# Three workers, one test file each at a time (pytest-xdist, --dist loadfile: a module's servers and
# agents start once, in one worker): most of the suite waits on real servers, agents and cycles, not
# the CPU (about 4 of 11 minutes in one process on 2 cores), so three at once take it under 5 minutes.
# FALCON_GPU_TEST_WORKERS=0 runs it in one process.
python -m pytest -q -p no:cacheprovider -n "${FALCON_GPU_TEST_WORKERS:-3}" --dist loadfile \
  --reruns 2 --reruns-delay 2 -raR "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: treat as failure" >&2
  exit 1
fi
exit "$rc"
