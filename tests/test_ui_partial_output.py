"""Partial redraws: which cells a changed line re-sends, and that the screen stays exact.

The unit tests pin the span arithmetic and the cropped terminal text. The tmux test runs the real
``gputop --demo`` for a while (thousands of partial updates), pauses it, and compares the
terminal's cells and colours with what a full repaint of the same paused screen draws.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from test_ui_e2e_tmux import Tmux, gputop_command, tmux, wait_until  # noqa: F401 - tmux is a fixture
from textual.strip import Strip

from gputop.ui.line_diff import MERGE_GAP, changed_spans, line_regions
from gputop.ui.partial_output import SpanChopsUpdate

RED = Style(color="red")
BLUE = Style(color="blue")


def strip(*parts: tuple[str, Style | None]) -> Strip:
    return Strip([Segment(text, style) for text, style in parts])


@pytest.mark.parametrize(
    ("old", "new", "spans"),
    [
        (strip(("util 40%", None)), strip(("util 40%", None)), []),
        (strip(("util 40%", None)), strip(("util 47%", None)), [(6, 7)]),
        (strip(("a 1 ", None), (" " * 20, None), ("b 2", None)), strip(("a 9 ", None), (" " * 20, None), ("b 8", None)),
         [(2, 3), (26, 27)]),
        (strip(("x1 x2", None)), strip(("y1 y2", None)), [(0, 4)]),
        (strip(("util 40%", None)), strip(("util ", None), ("40%", RED)), [(5, 8)]),
        (strip(("名前 1", None)), strip(("名前 2", None)), [(5, 6)]),
        (strip(("ab名c", None)), strip(("ab前c", None)), [(2, 4)]),
        (strip(("名c", None)), strip(("abc", None)), [(0, 2)]),
        (strip(("abc", None)), strip(("abcd", None)), [(3, 4)]),
        (strip(("util ", None), ("40%", BLUE)), strip(("util ", None), ("40%", RED)), [(5, 8)]),
    ],
    ids=["same", "one-digit", "two-far-runs", "near-runs-merge", "style-only", "after-wide", "wide-changed",
         "wide-half", "longer", "same-layout-restyled"],
)
def test_changed_spans(old: Strip, new: Strip, spans: list[tuple[int, int]]) -> None:
    assert changed_spans(old, new) == spans


def test_runs_just_far_enough_apart_stay_separate() -> None:
    gap = " " * MERGE_GAP
    assert changed_spans(strip((f"1{gap}1", None)), strip((f"2{gap}2", None))) == [(0, 1), (MERGE_GAP + 1, MERGE_GAP + 2)]


def test_a_line_never_shown_is_refreshed_whole() -> None:
    regions = line_regions(3, None, strip(("abc", None)), 40)
    assert [(r.x, r.y, r.width, r.height) for r in regions] == [(0, 3, 40, 1)]


def render(update: SpanChopsUpdate) -> str:
    return update.render_segments(Console(color_system="256", force_terminal=True, width=80))


def test_span_update_writes_only_the_span_cropped_on_both_sides() -> None:
    line = strip(("GPU0 util ", BLUE), ("47%", RED), (" mem 8GiB", BLUE))
    update = SpanChopsUpdate([{0: line}], [(0, 10, 13)], [[line.cell_length]])
    text = render(update)
    assert text.startswith("\x1b[1;11H")
    assert "47%" in text
    assert "GPU0" not in text and "mem" not in text


def test_span_update_crops_inside_segments() -> None:
    line = strip(("abcdefgh", RED), ("ijkl", None))
    update = SpanChopsUpdate([{0: line}], [(0, 2, 10)], [[line.cell_length]])
    text = render(update)
    assert text.startswith("\x1b[1;3H")
    assert text.endswith("ij")
    assert "cdefgh" in text and "ab" not in text and "k" not in text


def test_span_update_crosses_widget_cuts() -> None:
    left, right = strip(("abcdef", None)), strip(("ghijkl", None))
    update = SpanChopsUpdate([{0: left, 6: right}], [(0, 4, 8)], [[6, 12]])
    assert render(update) == "\x1b[1;5Hef\x1b[1;7Hgh"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (the CI script installs it)")
@pytest.mark.parametrize("size", [(160, 45), (80, 24)])
def test_partial_updates_leave_exactly_what_a_full_repaint_draws(
    tmux: Tmux, tmp_path: Path, size: tuple[int, int]  # noqa: F811 - pytest fixture
) -> None:
    tmux.start(gputop_command("--demo", "--interval", "0.1"), size, tmp_path)
    wait_until(lambda: "simulated" in tmux.screen() and "H100" in tmux.screen(), "the demo screen")
    time.sleep(6)  # about 60 polls of changing numbers, charts, bars and process rows
    tmux.keys("p")
    wait_until(lambda: "PAUSED" in tmux.screen(), "the pause")
    time.sleep(1.5)  # let the once-a-second panels apply the last snapshot
    incremental = tmux.run("capture-pane", "-p", "-e", "-t", "gputop")
    tmux.keys("?")  # the help screen covers everything; closing it repaints the main screen whole
    wait_until(lambda: "gputop keys" in tmux.screen(), "the help screen")
    tmux.keys("Escape")
    wait_until(lambda: "gputop keys" not in tmux.screen(), "the main screen again")
    time.sleep(1.0)
    repainted = tmux.run("capture-pane", "-p", "-e", "-t", "gputop")
    assert "PAUSED" in repainted
    assert incremental.splitlines() == repainted.splitlines()
