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


class Chart(Widget):
    """A history chart widget: set a series and its scale, it draws as many rows as it is tall.

    Only the newest samples that fit the width are drawn. The rendering is cached until the
    data, the size or the style changes.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {"chart--bar"}
    """``chart--bar``: colour of the bars."""

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
        self._values: Sequence[float | None] = ()
        self._maximum: float | None = None
        self._minimum = 0.0
        self._rows: list[Strip] | None = None
        self._rows_size: tuple[int, int] | None = None

    def set_series(self, values: Sequence[float | None], maximum: float | None, minimum: float = 0.0) -> None:
        """Show ``values`` (oldest first) on the fixed scale ``minimum..maximum``; redraws only on change."""
        values = tuple(values)
        if values == self._values and maximum == self._maximum and minimum == self._minimum:
            return
        self._values, self._maximum, self._minimum = values, maximum, minimum
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
            style = self.get_component_rich_style("chart--bar")
            self._rows = chart_rows(
                self._values,
                width,
                height,
                self._maximum,
                style,
                minimum=self._minimum,
                ascii_mode=self.ascii_mode,
                blank=self.rich_style,
            )
            self._rows_size = (width, height)
        return self._rows[y] if 0 <= y < len(self._rows) else Strip.blank(width, self.rich_style)
