"""The view's rules on a frame built by hand: GPU rows before pods, the window clamped, the
summary's words, and a screen shorter than its GPUs."""

from __future__ import annotations

from falcon_gpu.top.frame import Detail, Frame, GpuBlock, clip
from falcon_gpu.top.view import fit


def frame(width: int = 40) -> Frame:
    pods = (Detail("pod", "    ns/a"), Detail("process", "      pid 1"), Detail("pod", "    ns/b"))
    blocks = (GpuBlock("0   GPU zero  ok", pods), GpuBlock("1   GPU one  ok", (Detail("other", "    host"),)))
    return Frame(width, "title", "GPU MODEL", "    NAMESPACE/POD", blocks)


def test_everything_that_fits_is_drawn_whole_without_a_footer() -> None:
    view = fit(frame(), 9)
    assert view.lines[3:] == (
        "0   GPU zero  ok",
        "    ns/a",
        "      pid 1",
        "    ns/b",
        "1   GPU one  ok",
        "    host",
    )
    assert (view.offset, view.last) == (0, 0)


def test_a_short_screen_keeps_every_gpu_row_and_summarises_the_rest() -> None:
    view = fit(frame(), 7, offset=99)  # 3 head + 2 GPUs + footer: one line of pods, at the end
    assert view.lines == (
        "title", "GPU MODEL", "    NAMESPACE/POD",
        "0   GPU zero  ok  +2 pods", "1   GPU one  ok", "    host",
        "lines 4-4 of 4 under the GPUs  ↑↓ PgUp …",
    )  # fmt: skip
    assert (view.offset, view.page, view.last) == (3, 1, 3)
    top = fit(frame(), 7)
    assert top.lines[3:6] == ("0   GPU zero  ok  +1 pod", "    ns/a", "1   GPU one  ok  +more")


def test_a_screen_shorter_than_its_gpus_shows_the_gpu_rows_first_never_wider() -> None:
    narrow = Frame(12, "title", "GPU MODEL", "    NS/POD", frame().blocks)
    assert fit(narrow, 4).lines == ("title", "GPU MODEL", "0 …  +2 pods", "1   …  +more")
    assert fit(narrow, 3).lines == ("title", "GPU MODEL", "0 …  +2 pods")
    assert clip("abcdef", 4) == "abc…" and clip("abc", 3) == "abc" and clip("abc", 0) == ""
