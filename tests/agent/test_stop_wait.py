"""The main thread's wait for the stop: woken by a signal or by another thread setting the event, and
never in between (an idle agent's main thread used to wake twice a second to look at the event)."""

from __future__ import annotations

import os
import signal
import threading
import time

from falcon_gpu.agent.signals import wait_for


def _voluntary_switches(tid: int) -> int:
    """How often the thread has gone to sleep and been woken (Linux ``/proc``)."""
    with open(f"/proc/self/task/{tid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches in /proc")


def test_another_threads_set_wakes_the_main_thread_which_does_not_poll_meanwhile() -> None:
    assert threading.current_thread() is threading.main_thread()
    stop = threading.Event()
    tid = threading.get_native_id()
    seen: dict[str, int] = {}

    def later() -> None:
        time.sleep(0.3)
        seen["start"] = _voluntary_switches(tid)  # the main thread is asleep in its wait by now
        time.sleep(2.0)
        seen["end"] = _voluntary_switches(tid)
        stop.set()

    setter = threading.Thread(target=later)
    t0 = time.monotonic()
    setter.start()
    wait_for(stop)
    elapsed = time.monotonic() - t0
    setter.join()
    assert 2.3 <= elapsed < 3.5
    # a 0.5 s poll wakes it four times in 2 s; waiting on the socket alone, never
    assert seen["end"] - seen["start"] == 0


def test_a_signal_runs_its_handler_at_once_whichever_thread_the_kernel_picks() -> None:
    stop = threading.Event()
    previous = signal.signal(signal.SIGUSR1, lambda _s, _f: stop.set())
    try:
        # sent to the process from another thread: the kernel may hand it to any thread
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        t0 = time.monotonic()
        wait_for(stop)
        assert time.monotonic() - t0 < 1.5
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_the_wait_leaves_no_descriptor_or_thread_behind() -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    before_fds, before_threads = open_fds(), threading.active_count()
    for _ in range(3):
        stop = threading.Event()
        threading.Timer(0.05, stop.set).start()
        wait_for(stop)
    time.sleep(0.1)  # the timers' threads end just after they set the event
    assert open_fds() == before_fds
    assert threading.active_count() == before_threads
