"""What of a frame a screen of ``height`` lines shows, scrolled by ``offset``.

The title, the column headers and a row per GPU are always on the screen: they are what
``top`` is for, and a GPU that scrolled away would look like a GPU that is gone. The lines
under the GPUs (pods, processes) share what height is left: when they all fit, the frame is
drawn whole; otherwise a window of them is shown, each under its own GPU, the window moves
with ``offset`` (the screen's arrow keys and PgUp/PgDn), each GPU row ends with what of its
own is out of the window ("+3 pods"), and a last line says where the window is.
"""

from __future__ import annotations

from dataclasses import dataclass

from falcon_gpu.top.frame import Detail, Frame, clip


@dataclass(frozen=True)
class View:
    lines: tuple[str, ...]
    offset: int  # the first line under the GPUs that is shown, kept within the range
    page: int  # how many lines under the GPUs the screen shows at once (0: no room at all)
    last: int  # the largest useful offset; 0 when everything fits


def _summary(hidden: list[Detail]) -> str:
    pods = sum(d.kind == "pod" for d in hidden)
    if pods:
        return f"+{pods} pod" + ("s" if pods > 1 else "")
    return "+more" if hidden else ""


def _gpu_row(row: str, hidden: list[Detail], width: int) -> str:
    summary = _summary(hidden)
    if not summary:
        return clip(row, width)
    return clip(row, width - len(summary) - 2) + "  " + summary


KEYS = "  ↑↓ PgUp PgDn scroll  q quits"


def fit(frame: Frame, height: int | None, offset: int = 0, *, keys: str = KEYS) -> View:
    """The lines to draw, at most ``height`` of them (``None``: as many as the frame has);
    ``keys`` ends the line that says where the window is."""
    head = [frame.title]
    if frame.problem is not None:
        return View((frame.title, frame.problem), 0, 0, 0)
    details = [(i, d) for i, block in enumerate(frame.blocks) for d in block.details]
    head += [frame.gpu_header] + ([frame.pod_header] if details else [])
    rows = len(frame.blocks)
    if height is None or len(head) + rows + len(details) <= height:
        page, start = len(details), 0
        footer = False
    else:
        page = height - len(head) - rows - 1  # one line says where the window is
        footer = page > 0
        if not footer:  # no pod line fits: their header goes too, and the GPU rows come first
            head, page = head[:2], 0
        start = max(0, min(offset, len(details) - page))
    shown = details[start : start + page]
    lines = list(head)
    for i, block in enumerate(frame.blocks):
        hidden = [d for j, d in details[:start] + details[start + page :] if j == i]
        lines.append(_gpu_row(block.row, hidden, frame.width))
        lines += [d.text for j, d in shown if j == i]
    if footer:
        where = f"lines {start + 1}-{start + len(shown)} of {len(details)} under the GPUs"
        lines.append(clip(where + keys, frame.width))
    if height is not None:
        lines = lines[:height]  # a screen shorter than its GPUs: the first of them
    return View(tuple(lines), start, page, max(0, len(details) - page))


def text(view: View) -> str:
    return "\n".join(view.lines) + "\n"
