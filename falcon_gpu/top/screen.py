"""``falcon-gpu top``'s live screen: curses draws the frame, the keys scroll it.

Why curses (Python's standard library) rather than a PyPI library (rich, textual, urwid): the
screen is a list of plain lines redrawn once an interval, and a handful of keys. curses does
exactly that part that is hard to get right by hand — the terminal's size and its resizes, the
arrow and PgUp/PgDn keys as each terminal sends them (terminfo), redrawing only what changed,
and giving the terminal back as it was on any exit — is already on every Python with a
terminal, and costs about 1 ms to import (``python -X importtime -c 'import curses'``). The
others add a dependency tree to the agent's image and an import cost that ``top``'s start-up
would pay, for widgets and styling ``top`` does not use.

The cycles run on their own thread (:func:`~falcon_gpu.agent.loop.run_every`, as in ``run``)
and hand the newest one over through :class:`Latest`; the screen thread only lays out and
draws, so a slow NVML call never makes the keys wait.
"""

from __future__ import annotations

import curses
import os
import sys
import threading
from contextlib import suppress

from falcon_gpu.model.cycle import CycleData
from falcon_gpu.top.frame import build
from falcon_gpu.top.view import View, fit

POLL_MS = 100  # how long the screen waits for a key before it looks for a new cycle
QUIT = {ord("q"), ord("Q")}


class Latest:
    """The newest cycle, from the cycle thread to the screen, with a count that says it is new."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cycle: CycleData | None = None
        self._count = 0

    def put(self, cycle: CycleData) -> None:
        with self._lock:
            self._cycle, self._count = cycle, self._count + 1

    def get(self) -> tuple[int, CycleData | None]:
        with self._lock:
            return self._count, self._cycle


def scrolled(key: int, offset: int, view: View) -> int:
    """The offset after ``key``: a line (arrows, j/k), a page (PgUp/PgDn, space, b), the ends
    (Home/End, g/G); any other key leaves it."""
    moves = {
        curses.KEY_DOWN: 1,
        ord("j"): 1,
        curses.KEY_UP: -1,
        ord("k"): -1,
        curses.KEY_NPAGE: max(1, view.page),
        ord(" "): max(1, view.page),
        curses.KEY_PPAGE: -max(1, view.page),
        ord("b"): -max(1, view.page),
    }
    if key in (curses.KEY_HOME, ord("g")):
        return 0
    if key in (curses.KEY_END, ord("G")):
        return view.last
    return min(view.last, max(0, offset + moves.get(key, 0)))


def _draw(win: curses.window, lines: tuple[str, ...], repaint: bool) -> None:
    height, width = win.getmaxyx()
    win.erase()
    win.clearok(repaint)  # a new cycle repaints all: a log line written over the screen goes
    for y, line in enumerate(lines[:height]):
        # the bottom-right cell is written, then curses reports that the cursor cannot go on
        with suppress(curses.error):
            win.addnstr(y, 0, line, width)
    win.refresh()


def _follow_size() -> None:
    """Take the terminal's size from the terminal itself each time round: curses learns of a
    resize from SIGWINCH, and a process started while its pane was still being sized, or whose
    parent ignored SIGWINCH (inherited), never hears of it."""
    try:
        columns, lines = os.get_terminal_size(sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        return
    if curses.is_term_resized(lines, columns):
        curses.resizeterm(lines, columns)


def show(win: curses.window, latest: Latest, stop: threading.Event, interval: float) -> None:
    """Draw the newest cycle until ``q`` or ``stop`` (SIGINT/SIGTERM)."""
    with suppress(curses.error):
        curses.curs_set(0)
    win.timeout(POLL_MS)
    offset, drawn, view = 0, (-1, 0, 0, 0), None
    while not stop.is_set():
        count, cycle = latest.get()
        _follow_size()
        height, width = win.getmaxyx()
        if cycle is not None and (count, height, width, offset) != drawn:
            view = fit(build(cycle, width, interval=interval), height, offset)
            offset = view.offset
            _draw(win, view.lines, repaint=count != drawn[0])
            drawn = (count, height, width, offset)
        key = win.getch()
        if key in QUIT:
            return
        if view is not None:
            offset = scrolled(key, offset, view)
