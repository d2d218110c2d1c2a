"""Partial redraws: which cells a changed line re-sends, with which style codes, and that the screen stays exact.

The unit tests pin the span arithmetic and the exact terminal bytes: cropped on both sides, an SGR
only where the style changes, no reset per segment, no newlines. The app tests run the real
``GpusightApp`` and check that Textual builds its partial updates with our class (and with its own
when ``GPUSIGHT_PARTIAL_OUTPUT=0``). The fallback tests give ``install`` a stand-in for Textual's
compositor module whose ``ChopsUpdate`` differs. The tmux test runs the real ``gpusight --demo`` for
a while (thousands of partial updates), pauses it, and compares the terminal's cells and colours
with what a full repaint of the same paused screen draws.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from pathlib import Path
from types import ModuleType

import pytest
import textual
from rich.cells import cell_len
from rich.color import ColorSystem
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from test_ui_app import demo_sampler, run_app
from test_ui_e2e_tmux import Tmux, gpusight_command, tmux, wait_until  # noqa: F401 - tmux is a fixture
from textual import _compositor
from textual.geometry import Region
from textual.pilot import Pilot
from textual.strip import Strip

from gpusight.ui.main.app import GpusightApp
from gpusight.ui.main.header import HeaderBar
from gpusight.ui.terminal.cells import SCREEN
from gpusight.ui.terminal.line_diff import MERGE_GAP, changed_spans, line_regions
from gpusight.ui.terminal.partial_output import SWITCH, RecordedLayoutUpdate, SpanChopsUpdate, activate, install, status

RED = Style(color="red")
BLUE = Style(color="blue")
STOCK = SpanChopsUpdate.__base__
"""Textual's own ChopsUpdate."""
ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


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
    assert render(update) == "\x1b[1;5Hefgh"  # the cursor is already where the second piece starts


def test_a_later_piece_on_the_same_line_moves_relatively_after_ascii_only() -> None:
    line = strip(("abcdefghij", None))
    update = SpanChopsUpdate([{0: line}], [(0, 1, 3), (0, 6, 8)], [[10]])
    assert render(update) == "\x1b[1;2Hbc\x1b[3Cgh"
    wide = strip(("名前abcdefgh", None))
    update = SpanChopsUpdate([{0: wide}], [(0, 0, 4), (0, 8, 10)], [[12]])
    assert render(update) == "\x1b[1;1H名前\x1b[1;9Hef"  # after wide text the absolute move is kept


def test_one_style_across_pieces_and_lines_is_sent_once_and_reset_once_at_the_end() -> None:
    left, right, below = strip(("abc", RED)), strip(("def", RED)), strip(("ghi", RED))
    update = SpanChopsUpdate([{0: left, 3: right}, {0: below}], [(0, 1, 5), (1, 0, 3)], [[3, 6], [3]])
    assert render(update) == "\x1b[1;2H\x1b[31mbcde\x1b[2;1Hghi\x1b[0m"


def test_a_style_change_sends_only_what_changes_and_no_segment_is_followed_by_a_reset() -> None:
    line = strip(("ab", RED), ("cd", Style(bold=True, color="red", bgcolor="blue")), ("ef", BLUE), ("gh", None))
    update = SpanChopsUpdate([{0: line}], [(0, 0, 8)], [[8]])
    # bold and a background are added to red; dropping bold takes a full SGR; the default is a reset
    assert render(update) == "\x1b[1;1H\x1b[31mab\x1b[1;44mcd\x1b[0;34mef\x1b[0mgh"


def test_the_cropped_path_tracks_the_style_too() -> None:
    line = strip(("abcdef", RED), ("ghij", RED), ("kl", BLUE))
    update = SpanChopsUpdate([{0: line}], [(0, 2, 11)], [[line.cell_length]])
    assert render(update) == "\x1b[1;3H\x1b[31mcdefghij\x1b[34mk\x1b[0m"


def test_styles_that_differ_only_in_meta_or_have_no_codes_send_nothing_new() -> None:
    clickable = Style(color="red", meta={"@click": "app.sort('pid')"})
    line = strip(("ab", RED), ("cd", clickable), ("ef", Style()), ("gh", None))
    update = SpanChopsUpdate([{0: line}], [(0, 0, 8)], [[8]])
    assert render(update) == "\x1b[1;1H\x1b[31mabcd\x1b[0mefgh"


def test_a_link_is_written_as_textual_writes_it_from_the_default_style() -> None:
    link = Style(color="red", link="https://example.com")
    line = strip(("a", BLUE), ("L", link), ("b", BLUE))
    update = SpanChopsUpdate([{0: line}], [(0, 0, 3)], [[3]])
    linked = f"\x1b]8;id={link._link_id};https://example.com\x1b\\\x1b[31mL\x1b[0m\x1b]8;;\x1b\\"
    assert linked == Strip.render_style(link, "L", ColorSystem.EIGHT_BIT)
    assert render(update) == f"\x1b[1;1H\x1b[34ma\x1b[0m{linked}\x1b[34mb\x1b[0m"


# -- the real app: which class Textual uses, and what a partial update of it writes ---------------


def header_cells_update(app: GpusightApp, x: int, width: int) -> tuple[object, str]:
    """Refresh ``width`` cells of the header from column ``x`` and return Textual's partial update and its text."""
    header = app.query_one(HeaderBar)
    header.refresh(Region(x, 0, width, 1))
    compositor = app.screen._compositor
    compositor.update_widgets({header})
    update = compositor.render_update(screen_stack=app._background_screens)
    assert isinstance(update, _compositor.CompositorUpdate)
    return update, update.render_segments(app.console)


def run_and_render_header_cells(monkeypatch: pytest.MonkeyPatch, switch: str | None) -> tuple[object, object, str]:
    """Start the real app (with ``GPUSIGHT_PARTIAL_OUTPUT=switch``); the compositor's update class, an update, its text."""
    if switch is None:
        monkeypatch.delenv(SWITCH, raising=False)
    else:
        monkeypatch.setenv(SWITCH, switch)
    app = GpusightApp(demo_sampler("mixed", gpus=2, prefill=3), live=False)
    seen: list[tuple[object, object, str]] = []

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        seen.append((_compositor.ChopsUpdate, *header_cells_update(app, 100, 3)))

    run_app(app, (160, 45), body)
    return seen[0]


def test_the_running_app_sends_only_the_refreshed_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    in_place, update, text = run_and_render_header_cells(monkeypatch, None)
    assert in_place is SpanChopsUpdate
    assert type(update) is SpanChopsUpdate
    assert text.startswith("\x1b[1;101H")
    assert cell_len(ESCAPES.sub("", text)) == 3, repr(text)
    assert "\n" not in text


@pytest.mark.parametrize("switch", ["0", "off", "False", "NO"])
def test_the_switch_leaves_textual_own_output_in_place(monkeypatch: pytest.MonkeyPatch, switch: str) -> None:
    install()  # as an earlier app in this process would have
    in_place, update, text = run_and_render_header_cells(monkeypatch, switch)
    assert in_place is STOCK
    assert type(update) is STOCK
    assert text.startswith("\x1b[1;1H"), "Textual's own update starts at the widget's left edge"
    assert cell_len(ESCAPES.sub("", text)) == 103


# -- a Textual whose internals differ ---------------------------------------------------------------


class ChopsUpdateWithCrop:
    """Stand-in for a later Textual's ChopsUpdate that takes another argument."""

    def __init__(self, chops: object, spans: object, chop_ends: object, crop: object) -> None:
        self.chops, self.spans, self.chop_ends, self.crop = chops, spans, chop_ends, crop

    def render_segments(self, console: Console) -> str:
        return ""


class ChopsUpdateRenamed:
    """Stand-in for a later Textual's ChopsUpdate that keeps its parts under other names."""

    def __init__(self, chops: object, spans: object, chop_ends: object) -> None:
        self.lines, self.regions, self.ends = chops, spans, chop_ends

    def render_segments(self, console: Console) -> str:
        return ""


class ChopsUpdateLookalike(ChopsUpdateRenamed):
    """Stand-in with the right parts that is not the class SpanChopsUpdate extends."""

    def __init__(self, chops: object, spans: object, chop_ends: object) -> None:
        self.chops, self.spans, self.chop_ends = chops, spans, chop_ends


def compositor_module(update_class: type | None) -> ModuleType:
    """A stand-in for ``textual._compositor`` holding ``update_class`` as its ChopsUpdate (or none)."""
    module = ModuleType("textual._compositor")
    if update_class is not None:
        module.ChopsUpdate = update_class  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize(
    ("update_class", "reason"),
    [
        (None, "textual._compositor has no ChopsUpdate"),
        (ChopsUpdateWithCrop, "ChopsUpdate(chops=, spans=, chop_ends=) fails: "),
        (ChopsUpdateRenamed, "ChopsUpdate has no chops, spans, chop_ends"),
        (ChopsUpdateLookalike, "ChopsUpdate is not the class gpusight extends"),
    ],
    ids=["missing", "other-arguments", "other-attributes", "other-class"],
)
def test_install_falls_back_when_textual_internals_differ(
    update_class: type | None, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    module = compositor_module(update_class)
    found = install(module)
    assert found is not None and found.startswith(reason)
    assert getattr(module, "ChopsUpdate", None) is update_class
    minor = ".".join(textual.__version__.split(".")[:2])
    assert status({}, module) == f"unavailable (Textual {minor} internals differ: {found})"
    with caplog.at_level(logging.WARNING, logger="gpusight.ui.terminal.partial_output"):
        assert activate({}, module) is False
    assert getattr(module, "ChopsUpdate", None) is update_class
    assert [r.getMessage() for r in caplog.records] == [
        f"gpusight: partial output unavailable (Textual {minor} internals differ: {found}); Textual's own output is used"
    ]


def test_status_says_active_or_names_the_switch() -> None:
    module = compositor_module(STOCK)
    assert status({}, module) == "active"
    assert status({SWITCH: "1"}, module) == "active"
    assert status({SWITCH: "off"}, module) == f"off ({SWITCH}=off)"
    assert activate({}, module) is True and module.ChopsUpdate is SpanChopsUpdate
    assert status({}, module) == "active"
    assert activate({SWITCH: "0"}, module) is False and module.ChopsUpdate is STOCK


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (the CI script installs it)")
@pytest.mark.parametrize("size", [(160, 45), (80, 24)])
def test_partial_updates_leave_exactly_what_a_full_repaint_draws(
    tmux: Tmux, tmp_path: Path, size: tuple[int, int]  # noqa: F811 - pytest fixture
) -> None:
    tmux.start(gpusight_command("--demo", "--interval", "0.1"), size, tmp_path)
    wait_until(lambda: "simulated" in tmux.screen() and "H100" in tmux.screen(), "the demo screen")
    time.sleep(6)  # about 60 polls of changing numbers, charts, bars and process rows
    tmux.keys("p")
    wait_until(lambda: "PAUSED" in tmux.screen(), "the pause")
    time.sleep(1.5)  # let the once-a-second panels apply the last snapshot
    incremental = tmux.run("capture-pane", "-p", "-e", "-t", "gpusight")
    tmux.keys("?")  # the help screen covers everything; closing it repaints the main screen whole
    wait_until(lambda: "gpusight keys" in tmux.screen(), "the help screen")
    tmux.keys("Escape")
    wait_until(lambda: "gpusight keys" not in tmux.screen(), "the main screen again")
    time.sleep(1.0)
    repainted = tmux.run("capture-pane", "-p", "-e", "-t", "gpusight")
    assert "PAUSED" in repainted
    assert incremental.splitlines() == repainted.splitlines()


def full_repaint(*lines: Strip, width: int = 20) -> str:
    """Draw ``lines`` as Textual's full repaint does, which records them as the terminal's cells."""
    return RecordedLayoutUpdate([[line] for line in lines], Region(0, 0, width, len(lines))).render_segments(
        Console(color_system="256", force_terminal=True, width=80))


@pytest.fixture
def forget_screen():
    """Each test starts, and leaves, with nothing known about the terminal's cells."""
    SCREEN.forget()
    yield
    SCREEN.forget()


def test_after_a_full_repaint_only_the_cells_that_differ_from_the_terminal_are_sent(forget_screen: None) -> None:
    full_repaint(strip(("util 40% ", BLUE), ("mem 8GiB", RED)), strip(("▁▂▃▄▅", RED)))
    # the widget refreshes both lines whole, but only "7" and one chart cell differ from what is shown
    lines = [strip(("util 47% ", BLUE), ("mem 8GiB", RED)), strip(("▁▂▃▄▇", RED))]
    update = SpanChopsUpdate([{0: lines[0]}, {0: lines[1]}], [(0, 0, 17), (1, 0, 5)], [[17], [5]])
    assert render(update) == "\x1b[1;7H\x1b[34m7\x1b[2;5H\x1b[31m▇\x1b[0m"
    # what was sent is now known: the same update again sends nothing
    assert render(SpanChopsUpdate([{0: lines[0]}, {0: lines[1]}], [(0, 0, 17), (1, 0, 5)], [[17], [5]])) == ""


def test_a_restyled_cell_is_sent_and_a_changed_wide_character_is_sent_whole(forget_screen: None) -> None:
    full_repaint(strip(("ab名c", None)))
    line = strip(("ab", None), ("前", None), ("c", RED))
    update = SpanChopsUpdate([{0: line}], [(0, 0, 5)], [[5]])
    assert render(update) == "\x1b[1;3H前\x1b[31mc\x1b[0m"


def test_without_a_full_repaint_every_cell_of_a_span_is_sent(forget_screen: None) -> None:
    line = strip(("util 40%", None))
    update = SpanChopsUpdate([{0: line}], [(0, 0, 8)], [[8]])
    assert render(update) == "\x1b[1;1Hutil 40%"
    assert render(update) == "\x1b[1;1Hutil 40%"


def test_pieces_are_grouped_by_style_when_that_sends_fewer_bytes() -> None:
    # two chart rows whose colours alternate along the line but repeat down the panel
    rows = [strip(("a", RED), ("      ", None), ("b", BLUE)), strip(("c", RED), ("      ", None), ("d", BLUE))]
    update = SpanChopsUpdate([{0: rows[0]}, {0: rows[1]}], [(0, 0, 1), (0, 7, 8), (1, 0, 1), (1, 7, 8)], [[8], [8]])
    assert render(update) == "\x1b[1;1H\x1b[31ma\x1b[2;1Hc\x1b[1;8H\x1b[34mb\x1b[2;8Hd\x1b[0m"


def test_bold_is_turned_off_with_its_own_code_when_that_is_shorter() -> None:
    bold = Style(bold=True, color="color(253)", bgcolor="color(233)")
    chart = Style(color="color(71)", bgcolor="color(233)")
    line = strip(("42", bold), ("▅", chart))
    update = SpanChopsUpdate([{0: line}], [(0, 0, 3)], [[3]])
    assert render(update) == "\x1b[1;1H\x1b[1;38;5;253;48;5;233m42\x1b[22;38;5;71m▅\x1b[0m"
