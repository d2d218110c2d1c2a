"""What a new user meets first in the main screen, in a real tmux terminal (issue 27).

The help screen scrolls from the first key; the footer shows whole keys only, ``? Help`` always;
``k`` is not offered where there is nothing to signal (the demo, a replay) and says why when pressed;
``v`` is offered only where it changes a chart; the GPU detail screen's chart captions fit; the advice
panel says how many items are out of sight.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_ui_e2e_tmux import Tmux, alive, gpusight_command
from test_ui_e2e_tmux import wait_until as wait_for

from gpusight.ui.actions import ACTIONS
from support.recordings import write_demo_recording

SMALL = (80, 24)
LARGE = (160, 45)

FOOTER_WORDS = {entry.key_display for entry in ACTIONS} | {entry.label for entry in ACTIONS} | {
    "esc", "Back", "^p", "palette"}
"""Every word a whole footer key can show (the main screen's actions, the detail screen's Back, the palette)."""


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    server = Tmux(f"gpusight-first-{os.getpid()}-{time.monotonic_ns()}")
    SCREENS.append(server)
    yield server
    SCREENS.remove(server)
    server.kill_server()


SCREENS: list[Tmux] = []
"""The test's terminal, so a timeout can show what was on it."""


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Wait for ``condition``; on a timeout, the error shows the screen."""
    try:
        wait_for(condition, what)
    except AssertionError as error:
        raise AssertionError(f"{error}; the screen:\n{SCREENS[-1].screen() if SCREENS else ''}") from None


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten minutes of the input-bound demo, recorded (JSON lines: no optional dependency needed)."""
    return write_demo_recording(tmp_path_factory.mktemp("first") / "run.jsonl", 600, interval=2.0)


def start(tmux: Tmux, tmp_path: Path, size: tuple[int, int], *args: str) -> int:
    """Run gpusight with ``args`` at ``size`` and wait for its first screen (the demo's or the replay's label)."""
    pid = tmux.start(gpusight_command(*args), size, tmp_path)
    wait_until(lambda: re.search(r"simulated|replay: ", tmux.screen()) is not None, "the first screen")
    return pid


def footer(tmux: Tmux) -> str:
    """The footer, the terminal's last line."""
    return tmux.screen().rstrip("\n").splitlines()[-1]


def settled_footer(tmux: Tmux) -> str:
    """The footer once it is drawn and the same on two reads half a second apart."""
    wait_until(lambda: "q Quit" in footer(tmux), "the footer")
    previous = ""
    while (line := footer(tmux)) != previous:
        previous = line
        time.sleep(0.5)
    return line


def open_detail(tmux: Tmux) -> None:
    """Open the GPU detail screen from the command palette, as a user who does not know Enter would."""
    tmux.keys("C-p")
    wait_until(lambda: "🔎" in tmux.screen() or "Search" in tmux.screen(), "the command palette")
    tmux.keys("GPU details")
    wait_until(lambda: "GPU details" in tmux.screen(), "the palette to offer GPU details")
    tmux.keys("Enter")
    wait_until(lambda: "compute capability" in tmux.screen() or "esc Back" in footer(tmux), "the detail screen")


def test_help_scrolls_from_the_first_key_and_says_so(tmux: Tmux, tmp_path: Path) -> None:
    pid = start(tmux, tmp_path, SMALL, "--demo")
    tmux.keys("?")
    wait_until(lambda: "gpusight keys" in tmux.screen(), "the help screen")
    wait_until(lambda: "PgUp PgDn scroll" in tmux.screen(), "the help screen to say that it scrolls")
    assert "sort processes by" not in tmux.screen() and "Ctrl+P" not in tmux.screen()
    tmux.keys("PageDown")
    wait_until(lambda: "sort processes by" in tmux.screen(), "PageDown to bring the sort keys into view")
    tmux.keys("End")
    wait_until(lambda: "Ctrl+P" in tmux.screen(), "End to bring Ctrl+P into view")
    tmux.keys("Home")
    wait_until(lambda: "Ctrl+P" not in tmux.screen() and "pause / resume" in tmux.screen(), "Home to go back up")
    tmux.keys("Escape")
    wait_until(lambda: "gpusight keys" not in tmux.screen(), "Esc to close the help")
    tmux.keys("?")
    wait_until(lambda: "gpusight keys" in tmux.screen(), "the help screen again")
    tmux.keys("?")
    wait_until(lambda: "gpusight keys" not in tmux.screen(), "? to close the help")
    tmux.keys("q")
    wait_until(lambda: not alive(pid), "gpusight to exit after q")


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x45"])
@pytest.mark.parametrize("where", ["demo", "replay", "detail"])
def test_footer_shows_whole_keys_and_help(
    tmux: Tmux, tmp_path: Path, recording: Path, size: tuple[int, int], where: str
) -> None:
    start(tmux, tmp_path, size, *(("--replay", str(recording)) if where == "replay" else ("--demo",)))
    if where == "detail":
        open_detail(tmux)
    line = settled_footer(tmux)
    assert "? Help" in line, line
    words = set(line.replace("▏", " ").split())
    assert words <= FOOTER_WORDS, f"cut or run-together words {words - FOOTER_WORDS} in {line!r}"
    assert len(line) <= size[0]


@pytest.mark.parametrize("where", ["demo", "replay"])
def test_k_is_not_offered_for_simulated_or_recorded_processes(
    tmux: Tmux, tmp_path: Path, recording: Path, where: str
) -> None:
    start(tmux, tmp_path, LARGE, *(("--replay", str(recording)) if where == "replay" else ("--demo",)))
    assert "k Signal" not in settled_footer(tmux)
    tmux.keys("k")
    wait_until(lambda: "signals go only to live processes" in tmux.screen(), "k to say why it does nothing")
    assert "Send a signal" not in tmux.screen()
    tmux.keys("?")
    wait_until(lambda: "gpusight keys" in tmux.screen(), "the help screen")
    assert "send a signal" not in tmux.screen()


def test_v_is_offered_only_where_it_changes_a_chart(tmux: Tmux, tmp_path: Path) -> None:
    # 8 GPUs at 80x24: one line each, charting one metric that v changes.
    start(tmux, tmp_path, SMALL, "--demo", "mixed")
    wait_until(lambda: "v chart: util" in tmux.screen(), "the one-line layout")
    assert "v Chart" in settled_footer(tmux)
    tmux.keys("v")
    wait_until(lambda: "v chart: mem" in tmux.screen(), "v to chart memory")
    tmux.run("resize-window", "-t", "gpusight", "-x", str(LARGE[0]), "-y", str(LARGE[1]))
    # At 160x45 every GPU shows all its charts: v changes nothing, so it is not offered.
    wait_until(lambda: "v chart" not in tmux.screen() and "? Help" in footer(tmux), "the full layout")
    wait_until(lambda: "v Chart" not in footer(tmux), "the footer to drop v")
    tmux.keys("v")
    wait_until(lambda: "one-line GPU layout" in tmux.screen(), "v to say why it does nothing")


CAPTION = (r"(GPU util|memory used|power|temperature|PCIe RX|PCIe TX|SM clock|fan|SM active|tensor active|DRAM active)"
           r" \S+(  \(0\.\.[^ ,()]+(, last [^ ()]+)?\))?")
"""One whole chart caption: title and value, then the scale and the span, or the scale alone, or neither."""


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x45"])
def test_detail_chart_captions_are_whole(tmux: Tmux, tmp_path: Path, size: tuple[int, int]) -> None:
    start(tmux, tmp_path, size, "--demo")
    open_detail(tmux)
    wait_until(lambda: "GPU util" in tmux.screen(), "the charts")
    time.sleep(1.5)  # a few snapshots: each redraws the captions at the charts' laid-out widths
    # The right-hand side of each line, less the scrollbar at its edge.
    rights = [re.split("[│╮]", line)[-1].rstrip(" ▁▂▃▄▅▆▇█") for line in tmux.screen().splitlines()]
    rights = [right.strip() for right in rights]
    captions = [right for right in rights if re.match(CAPTION[:CAPTION.index(")") + 1], right)]
    assert len(captions) >= 5, tmux.screen()
    for line in captions:
        # Each caption whole (no bracket left open), two or more spaces between neighbours.
        assert re.fullmatch(rf"{CAPTION}(\s{{2,}}{CAPTION})*", line), f"cut or run-together captions: {line!r}"


def test_advice_panel_says_how_many_items_are_hidden(tmux: Tmux, tmp_path: Path) -> None:
    start(tmux, tmp_path, LARGE, "--demo", "mixed")
    wait_until(lambda: re.search(r"Advice \((\d+)\)", tmux.screen()) is not None, "the advice panel")
    total = int(re.search(r"Advice \((\d+)\)", tmux.screen()).group(1))
    hint = re.compile(rf"(\d+) of {total} shown: (Tab, then )?Down or PgDn")
    wait_until(lambda: hint.search(tmux.screen()) is not None, "the count of hidden advice")
    shown = int(hint.search(tmux.screen()).group(1))
    assert 0 < shown < total
    tmux.keys("Tab")
    wait_until(lambda: f"of {total} shown: Down or PgDn" in tmux.screen(), "Tab to focus the advice panel")
    tmux.keys("End")
    wait_until(lambda: hint.search(tmux.screen()) is None or hint.search(tmux.screen()).group(1) != str(shown),
               "End to scroll the advice")


def test_export_is_described_by_every_file_it_writes(tmux: Tmux, tmp_path: Path) -> None:
    export_dir = tmp_path / "exports"
    start(tmux, tmp_path, LARGE, "--demo", "--export-dir", str(export_dir))
    tmux.keys("?")
    wait_until(lambda: "gpusight keys" in tmux.screen(), "the help screen")
    assert "export a snapshot (JSON, Markdown, SVG, HTML report)" in tmux.screen()
    tmux.keys("Escape")
    wait_until(lambda: "gpusight keys" not in tmux.screen(), "Esc to close the help")
    tmux.keys("C-p")
    wait_until(lambda: "🔎" in tmux.screen(), "the command palette")
    tmux.keys("Export snapshot")
    wait_until(lambda: "Export a snapshot (JSON, Markdown, SVG, HTML report)" in tmux.screen(), "the palette's line")
    tmux.keys("Enter")
    wait_until(lambda: export_dir.is_dir() and {p.suffix for p in export_dir.iterdir()} == {".json", ".md", ".svg", ".html"},
               "the four files the description names")
