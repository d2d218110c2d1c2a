"""Fixed-scale history charts drawn with the line API: few segments, few bytes on the wire.

Unlike Textual's ``Sparkline`` the scale is given by the caller (0-100 %, 0-power limit,
0-total memory, ...), so a constant 50 % series draws at half height. Each row is one
``Strip`` with one segment per run of equal style, newest sample at the right edge.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

UNICODE_LEVELS = " ▁▂▃▄▅▆▇█"
"""Cell glyphs for 0..8 eighths of a row."""

ASCII_LEVELS = " _.-:=+*#"
"""ASCII stand-ins for 0..8 eighths of a row."""

StyleFor = Callable[[float], Style]
"""Picks the style of a column from its value (e.g. red above a temperature threshold)."""


def chart_rows(
    values: Sequence[float | None],
    width: int,
    height: int,
    maximum: float | None,
    style: Style | StyleFor,
    *,
    minimum: float = 0.0,
    ascii_mode: bool = False,
    blank: Style | None = None,
) -> list[Strip]:
    """Render the newest ``width`` values as ``height`` rows scaled from ``minimum`` to ``maximum``.

    Values are clamped to the scale; a known value always shows at least the lowest glyph, so
    zero differs from missing. None and NaN (and columns with no sample yet) draw blank, in
    ``blank`` style when no bar is beside them (give the widget's background). Without a usable
    scale (``maximum`` None, not finite, or not above a finite ``minimum``) every column is
    blank. Returns ``height`` strips, top row first.
    """
    if width <= 0 or height <= 0:
        return [Strip.blank(max(0, width), blank) for _ in range(max(0, height))]
    levels = ASCII_LEVELS if ascii_mode else UNICODE_LEVELS
    shown = list(values[-width:]) if values else []
    pad = width - len(shown)
    top = _usable_maximum(minimum, maximum)
    total = height * 8
    eighths: list[int] = []
    styles: list[Style | None] = []
    for value in shown:
        if value is None or top is None or math.isnan(value):
            eighths.append(0)
            styles.append(None)
            continue
        level = round((min(max(value, minimum), top) - minimum) / (top - minimum) * total)
        eighths.append(max(1, level))
        styles.append(style(value) if callable(style) else style)
    base = style if isinstance(style, Style) else blank
    rows: list[Strip] = []
    for row in range(height):
        floor = (height - 1 - row) * 8
        glyphs = [levels[min(8, max(0, e - floor))] for e in eighths]
        rows.append(_row_strip(" " * pad, glyphs, styles, base, width))
    return rows


def _usable_maximum(minimum: float, maximum: float | None) -> float | None:
    """``maximum`` when ``minimum..maximum`` is a finite, non-empty scale, else None."""
    if maximum is None or not math.isfinite(minimum) or not math.isfinite(maximum) or maximum <= minimum:
        return None
    return maximum


def _row_strip(padding: str, glyphs: list[str], styles: list[Style | None], base: Style | None, width: int) -> Strip:
    """Join glyphs into one segment per style run; blank cells join whatever run they sit in."""
    segments: list[Segment] = []
    run_text = padding
    run_style = base
    for glyph, style in zip(glyphs, styles, strict=True):
        if glyph == " " or style is None or style == run_style:
            run_text += glyph
            continue
        if run_style is None or not run_text.strip():
            run_style = style
            run_text += glyph
            continue
        segments.append(Segment(run_text, run_style))
        run_text, run_style = glyph, style
    if run_text:
        segments.append(Segment(run_text, run_style))
    return Strip(segments, width)


class CachedChart(Widget):
    """What every chart widget shares: ASCII mode, and rows drawn once until the data, the size or the style changes.

    A subclass draws its rows in :meth:`draw` and calls :meth:`redraw` when its data changes.
    """

    def __init__(
        self,
        *,
        ascii_mode: bool = False,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.ascii_mode = ascii_mode
        """Draw with ASCII glyphs only."""
        self._rows: list[Strip] | None = None
        self._rows_size: tuple[int, int] | None = None

    def draw(self, width: int, height: int) -> list[Strip]:
        """The chart's ``height`` rows, ``width`` cells each, top row first."""
        raise NotImplementedError

    def redraw(self) -> None:
        """Drop the drawn rows and repaint (the data changed)."""
        self._rows = None
        self.refresh()

    def notify_style_update(self) -> None:
        """Drop the cached rows when the theme or CSS changes."""
        super().notify_style_update()
        self._rows = None

    def render_line(self, y: int) -> Strip:
        """One row of the chart (top row is y=0)."""
        width, height = self.size.width, self.size.height
        if self._rows is None or self._rows_size != (width, height):
            self._rows = self.draw(width, height)
            self._rows_size = (width, height)
        return self._rows[y] if 0 <= y < len(self._rows) else Strip.blank(width, self.rich_style)


class Chart(CachedChart):
    """A history chart widget: set a series and its scale, it draws as many rows as it is tall.

    Only the newest samples that fit the width are drawn. The rendering is cached until the
    data, the size or the style changes.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {"chart--bar"}
    """``chart--bar``: colour of the bars."""

    _values: Sequence[float | None] = ()
    _maximum: float | None = None
    _minimum: float = 0.0

    def set_series(self, values: Sequence[float | None], maximum: float | None, minimum: float = 0.0) -> None:
        """Show ``values`` (oldest first) on the fixed scale ``minimum..maximum``; redraws only on change."""
        values = tuple(values)
        if values == self._values and maximum == self._maximum and minimum == self._minimum:
            return
        self._values, self._maximum, self._minimum = values, maximum, minimum
        self.redraw()

    def draw(self, width: int, height: int) -> list[Strip]:
        """The bars of the series on its scale."""
        return chart_rows(
            self._values,
            width,
            height,
            self._maximum,
            self.get_component_rich_style("chart--bar"),
            minimum=self._minimum,
            ascii_mode=self.ascii_mode,
            blank=self.rich_style,
        )

STACK_GLYPHS = "░█▒▓·"
"""Fill of each part of a stacked chart, bottom first, so the parts read apart without colour too."""

ASCII_STACK_GLYPHS = "=#~+."
"""ASCII stand-ins for :data:`STACK_GLYPHS`."""

STACK_PARTS = len(STACK_GLYPHS)
"""Most parts a stacked chart draws."""


def stack_cells(shares: Sequence[float | None], height: int) -> list[int] | None:
    """How many of ``height`` cells each part fills: its share of the parts' sum, rounded so they add up to ``height``
    (largest remainders first). None when no share is known or they sum to nothing; an unknown part counts as 0."""
    known = [max(0.0, share) if share is not None and not math.isnan(share) else 0.0 for share in shares]
    total = sum(known)
    if height <= 0 or total <= 0.0 or all(share is None for share in shares):
        return None
    exact = [share / total * height for share in known]
    cells = [math.floor(value) for value in exact]
    by_remainder = sorted(range(len(exact)), key=lambda part: exact[part] - cells[part], reverse=True)
    for part in by_remainder[: height - sum(cells)]:
        cells[part] += 1
    return cells


def stacked_rows(
    parts: Sequence[Sequence[float | None]],
    width: int,
    height: int,
    styles: Sequence[Style],
    *,
    ascii_mode: bool = False,
    blank: Style | None = None,
) -> list[Strip]:
    """Render the newest ``width`` columns of ``parts`` (one series per part, bottom part first, all as long) as
    ``height`` rows: each column stacks the parts' shares of their sum, each part in its style and glyph
    (:data:`STACK_GLYPHS`). A column with nothing known draws blank. Returns ``height`` strips, top row first."""
    if width <= 0 or height <= 0 or not parts:
        return [Strip.blank(max(0, width), blank) for _ in range(max(0, height))]
    glyph_set = ASCII_STACK_GLYPHS if ascii_mode else STACK_GLYPHS
    length = min(len(series) for series in parts)
    first = max(0, length - width)
    columns = [stack_cells([series[i] for series in parts], height) for i in range(first, length)]
    pad = width - len(columns)
    grid_glyphs: list[list[str]] = [[] for _ in range(height)]
    grid_styles: list[list[Style | None]] = [[] for _ in range(height)]
    for cells in columns:
        column: list[tuple[str, Style | None]] = []  # bottom cell first
        if cells is not None:
            for part, count in enumerate(cells):
                column.extend([(glyph_set[part], styles[part])] * count)
        column.extend([(" ", None)] * (height - len(column)))
        for row in range(height):
            glyph, style = column[height - 1 - row]
            grid_glyphs[row].append(glyph)
            grid_styles[row].append(style)
    return [_row_strip(" " * pad, grid_glyphs[row], grid_styles[row], blank, width) for row in range(height)]


class StackedChart(CachedChart):
    """A stacked history chart: per column, the shares of up to :data:`STACK_PARTS` parts, bottom part first.

    Each part has its own colour (``stacked-chart--part-N``) and glyph, so it reads without colour too. The
    rendering is cached until the data, the size or the style changes.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {f"stacked-chart--part-{part}" for part in range(STACK_PARTS)}
    """``stacked-chart--part-N``: colour of the N-th part from the bottom."""

    _parts: tuple[tuple[float | None, ...], ...] = ()

    def part_style(self, part: int) -> Style:
        """The colour of the ``part``-th part from the bottom (for a legend)."""
        return self.get_component_rich_style(f"stacked-chart--part-{part}")

    def glyph(self, part: int) -> str:
        """The fill glyph of the ``part``-th part from the bottom (for a legend)."""
        return (ASCII_STACK_GLYPHS if self.ascii_mode else STACK_GLYPHS)[part]

    def set_parts(self, parts: Sequence[Sequence[float | None]]) -> None:
        """Show ``parts`` (one series per part, oldest first, at most :data:`STACK_PARTS`); redraws only on change."""
        if len(parts) > STACK_PARTS:
            raise ValueError(f"a stacked chart draws at most {STACK_PARTS} parts")
        stacked = tuple(tuple(series) for series in parts)
        if stacked != self._parts:
            self._parts = stacked
            self.redraw()

    def draw(self, width: int, height: int) -> list[Strip]:
        """The parts' shares, stacked per column."""
        styles = [self.part_style(part) for part in range(len(self._parts))]
        return stacked_rows(self._parts, width, height, styles, ascii_mode=self.ascii_mode, blank=self.rich_style)
