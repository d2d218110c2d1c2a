"""The PNG screenshots: a Textual SVG drawn by the project's renderer (``support.chromium.svg_to_png``, which
``scripts/screenshots.py`` uses), then read back pixel by pixel.

Textual writes each run of text in a screenshot as a ``<text>`` element at its own cell, with every space written as
a non-breaking space; librsvg (the renderer before) dropped those that start a run, so "iowait 3%   MEM" became
"iowait 3%MEM" and indented rows went flush left. Here every cell that holds a space must have no ink and every other
cell some, so each word starts at its own cell. Skipped, with the reason, when chromium is not installed.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Static

from support.chromium import CHROMIUM, INSTALL, svg_size, svg_to_png
from support.png import png_pixels

REPO = Path(__file__).resolve().parent.parent

LINES = ("iowait 3%   MEM", "    └─ 52821")
"""What the app shows: words after a run of spaces in another style, and an indented worker row."""

SIZE = (20, 6)
"""The terminal's columns and rows."""

SCALE = 2
"""Device pixels to an SVG pixel, as the screenshots use for 80 columns."""


class Lines(App[None]):
    """An app that shows ``LINES``, the first in three styles so the spaces after "3%" start a run of their own."""

    def compose(self) -> ComposeResult:
        """One Static with both lines."""
        first = Text.assemble(("iowait ", ""), ("3%", "bold"), ("   MEM", ""))
        yield Static(Text("\n").join([first, Text(LINES[1])]))


async def lines_svg() -> str:
    """Textual's own SVG screenshot of ``Lines`` in a terminal of ``SIZE``."""
    app = Lines()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        return app.export_screenshot(title="lines")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The SVG text and its PNG, drawn by the project's renderer."""
    if CHROMIUM is None:
        pytest.skip(INSTALL)
    directory = tmp_path_factory.mktemp("png")
    svg = directory / "lines.svg"
    svg.write_text(asyncio.run(lines_svg()), encoding="utf-8")
    png = directory / "lines.png"
    svg_to_png(svg, png, scale=SCALE)
    return svg.read_text(encoding="utf-8"), png


def inked_cells(svg: str, png: Path, line: int, cells: int) -> list[bool]:
    """For each of the first ``cells`` cells of terminal ``line``: whether the PNG has ink there.

    The cell grid is read from the SVG: the terminal's offset, the width of a cell (a run's ``textLength`` over its
    characters) and the line's clip rectangle. Ink is a pixel far from the colour of the line's last cell (blank); a
    margin of two device pixels inside each cell keeps a neighbour's anti-aliasing out.
    """
    offset = re.search(r'<g transform="translate\(([\d.]+), ([\d.]+)\)" clip-path', svg)
    run = re.search(r'textLength="([\d.]+)"[^>]*>([^<]+)</text>', svg)
    band = re.search(rf'-line-{line}">\s*<rect x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)"', svg)
    assert offset and run and band
    left, top = float(offset.group(1)), float(offset.group(2))
    cell = float(run.group(1)) / len(run.group(2).replace("&#160;", " "))
    y0, y1 = top + float(band.group(1)), top + float(band.group(1)) + float(band.group(2))
    width, _, rows = png_pixels(png)
    channels = len(rows[0]) // width
    band_rows = rows[math.ceil(y0 * SCALE) + 2:int(y1 * SCALE) - 2]
    last = int((left + (SIZE[0] - 0.5) * cell) * SCALE)
    background = band_rows[0][last * channels:last * channels + 3]

    def inked(column: int) -> bool:
        x0, x1 = math.ceil((left + column * cell) * SCALE) + 2, int((left + (column + 1) * cell) * SCALE) - 2
        pixels = (row[x * channels:x * channels + 3] for row in band_rows for x in range(x0, x1))
        return any(sum(abs(a - b) for a, b in zip(pixel, background, strict=True)) > 90 for pixel in pixels)

    return [inked(column) for column in range(cells)]


@pytest.mark.parametrize("line", range(len(LINES)))
def test_spaces_keep_their_cells(rendered: tuple[str, Path], line: int) -> None:
    svg, png = rendered
    text = LINES[line]
    assert inked_cells(svg, png, line, len(text)) == [char != " " for char in text], text


def test_png_is_the_svg_and_nothing_around_it(rendered: tuple[str, Path]) -> None:
    svg, png = rendered
    width, height = svg_size(svg)
    png_width, png_height, rows = png_pixels(png)
    assert (png_width, png_height) == (math.ceil(width) * SCALE, math.ceil(height) * SCALE)
    channels = len(rows[0]) // png_width

    def pixel(x: float, y: float) -> bytes:
        """The RGBA pixel at SVG coordinates ``x``, ``y``."""
        row = rows[int(y * SCALE)]
        return row[int(x * SCALE) * channels:int(x * SCALE) * channels + 4]

    assert channels == 4 and pixel(0, 0)[3] == 0  # the rounded corner is transparent, not a white margin
    window = pixel(width / 2, 5)  # the window's frame, above its title
    assert window[3] == 255
    assert pixel(width - 3, height / 2) == window  # it reaches the right edge
    assert pixel(width / 2, height - 3) == window  # and the bottom: nothing is cut off or left unpainted


def test_script_stops_when_chromium_is_missing(tmp_path: Path) -> None:
    out = tmp_path / "shots"
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "screenshots.py"), str(out)], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PATH": str(tmp_path)})
    assert result.returncode == 1
    assert "chromium is not installed" in result.stderr
    assert not out.exists() or not any(out.iterdir())
