"""gRPC's C core keeps quiet on stderr unless ``--log-level debug`` (issue 8 item 18).

The kubelet going away (its server stopping sends the agent's channel a GOAWAY)
makes the core log ``I1201 … chttp2_transport.cc] … Got goaway`` on its own;
the agent already reports the kubelet's state through its own log.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from falcon_gpu.simulator.node.podresources_server import PodResourcesServer

ROOT = Path(__file__).resolve().parents[2]
GOAWAY_WAIT = {"info": 3.0, "debug": 25.0}
"""Seconds for the GOAWAY to reach the agent and be logged: at info it never shows, so the wait is
short; at debug the loop ends as soon as it shows, and a loaded machine may take a while."""
CORE_LINE = re.compile(r"^[DIWEF]\d{4} ", re.MULTILINE)  # absl/gpr format: severity + MMDD


def _without_grpc_logging_settings() -> dict[str, str]:
    """The environment without ``GRPC_VERBOSITY``/``GRPC_TRACE``: a command run in this test process
    before (``cli.main`` at info sets ``GRPC_VERBOSITY=NONE`` in ``os.environ``, as the agent must before
    grpc loads) would otherwise silence the child's core at debug too, and what this test sees would
    depend on which tests ran first in the same process (seen with three workers)."""
    return {k: v for k, v in os.environ.items() if k not in ("GRPC_VERBOSITY", "GRPC_TRACE")}


def stderr_across_a_goaway(tmp_path: Path, level: str) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    sock = tmp_path / "kubelet.sock"
    server = PodResourcesServer(sock)
    server.start()
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'spool_dir = "{tmp_path / "spool"}"\nkubelet_socket = "{sock}"\ninterval = 1\n'
        '[[sinks]]\ntype = "stdout"\nformat = "json"\n'
    )
    log = tmp_path / "stderr.log"
    out = tmp_path / "stdout.log"  # a file, not a pipe: a pipe nobody reads fills up and stalls the cycles
    with log.open("w") as err, out.open("w") as stdout:
        agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "falcon_gpu",
                "run",
                "--simulate",
                "--config",
                str(cfg),
                "--log-level",
                level,
            ],
            stdout=stdout,
            stderr=err,
            text=True,
            cwd=ROOT,
            env=_without_grpc_logging_settings(),
        )
    try:
        deadline = time.monotonic() + 30
        while "\n" not in out.read_text() and time.monotonic() < deadline:  # the first cycle is out
            time.sleep(0.05)
        deadline = time.monotonic() + 20
        # Both calls of the first refresh answered: the channel is connected and idle, so the stop below
        # reaches it as a GOAWAY (not as a failed call in flight, which a loaded machine made flaky).
        while (server.calls == 0 or server.allocatable_calls == 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.calls > 0 and server.allocatable_calls > 0
        time.sleep(0.2)  # the answer is back at the agent
        server.stop()  # GOAWAY to the agent's open channel
        deadline = time.monotonic() + GOAWAY_WAIT[level]
        while time.monotonic() < deadline and "goaway" not in log.read_text().lower():
            time.sleep(0.1)
        agent.send_signal(signal.SIGTERM)
        agent.communicate(timeout=30)
    finally:
        if agent.poll() is None:
            agent.kill()
        server.stop()
    return log.read_text()


def test_grpc_core_is_silent_at_info(tmp_path: Path) -> None:
    err = stderr_across_a_goaway(tmp_path, "info")
    assert not CORE_LINE.search(err), err
    assert "goaway" not in err.lower()


def test_grpc_core_speaks_at_debug(tmp_path: Path) -> None:
    """The same run at debug shows the core's line: the test above can fail.

    Whether the stop reaches the agent's channel as a GOAWAY frame (the line this looks for) or as a
    closed socket the core does not log is a race on a loaded machine, so the run is tried up to five
    times (three missed once under a full suite beside other work); it fails only if the core never
    speaks at debug."""
    err = ""
    for attempt in range(5):
        err = stderr_across_a_goaway(tmp_path / str(attempt), "debug")
        if CORE_LINE.search(err) and "goaway" in err.lower():
            return
    raise AssertionError(err[-3000:])
