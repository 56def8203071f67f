"""What the agent does on each signal, as Prometheus and node_exporter do.

- SIGTERM, SIGINT: stop after the running cycle (waited for at most ``stuck_after``), then close:
  sinks get their ``timeout`` to deliver what is pending (what is left stays spooled), so a
  hanging receiver holds the shutdown up for ``timeout`` + about a second, not more.
- A second SIGINT (Ctrl-C again): exit at once (status 130), leaving the spool as it is.
- SIGHUP (``run`` only): reload the configuration between two cycles; a file that does not load
  keeps the running configuration (logged), the ``listen`` socket and the spools stay
  (:mod:`falcon_gpu.agent.reload`). Without a reload handler (``top``) SIGHUP keeps its default.

The handlers only set events (and write one line): Python runs them in the main thread between
two bytecodes, where taking a lock the interrupted code holds would deadlock. The kernel may hand a
signal to any thread, though, and a main thread blocked in ``Event.wait()`` is then not woken: the
handler would wait until something else woke it (a SIGHUP seen only at the next SIGTERM).
:func:`wait_for` therefore waits on a socket that the interpreter writes to on every signal
(:func:`signal.set_wakeup_fd`), whichever thread the kernel chose, and that a helper thread blocked
in ``event.wait()`` writes to when another thread sets the event. Nothing polls: an idle agent's
main thread never wakes (it woke twice a second, 0.3 ms of CPU a second on a VM, half the agent's
idle cost; docs/BENCHMARKS.md "Idle CPU").
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import threading
from typing import Any

INTERRUPTED = 130
"""The exit status of a second SIGINT (128 + SIGINT), as a shell reports it."""


def _say(text: str) -> None:
    """One line on stderr without the logging module's locks (a signal handler may interrupt them)."""
    with contextlib.suppress(OSError):
        os.write(2, f"falcon-gpu: {text}\n".encode())


def install_signals(stop: threading.Event, reload: threading.Event | None = None) -> None:
    """Install the handlers (main thread only)."""

    def on_stop(signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if stop.is_set():
            if signum == signal.SIGINT:
                _say("second SIGINT, exiting at once (the spool keeps what was not sent)")
                os._exit(INTERRUPTED)
            return
        _say(f"received {name}, stopping after the current cycle")
        stop.set()

    def on_reload(_signum: int, _frame: Any) -> None:
        assert reload is not None
        _say("received SIGHUP, reloading the configuration before the next cycle")
        reload.set()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    if reload is not None:
        signal.signal(signal.SIGHUP, on_reload)


def wait_for(event: threading.Event) -> None:
    """Block until ``event`` is set, running signal handlers as soon as a signal arrives (see the
    module docstring). Outside the main thread (no signal handlers run there) a plain wait."""
    if threading.current_thread() is not threading.main_thread():
        event.wait()
        return
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)

    def poke_when_set() -> None:
        """Wake the select below when another thread sets ``event`` (a full socket: it is awake
        anyway; a closed one: it has gone)."""
        event.wait()
        with contextlib.suppress(OSError):
            writer.send(b"\0")

    poker = threading.Thread(target=poke_when_set, name="falcon-gpu-stop-wake", daemon=True)
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    try:
        poker.start()
        while not event.is_set():
            select.select([reader], [], [])  # the handlers run right after it returns
            with contextlib.suppress(BlockingIOError):
                reader.recv(4096)
    finally:
        # The writer is closed only once no signal and no helper can write to it any more: a closed
        # descriptor's number may be reused by any open() in the meantime, and a byte would land there.
        signal.set_wakeup_fd(previous)
        if event.is_set():
            poker.join()  # at once: its wait is over, its send does not block
            writer.close()
        # else an exception ends the wait (the helper still waits: the writer stays open, one
        # descriptor, until the process ends)
        reader.close()
