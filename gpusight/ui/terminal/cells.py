"""What the terminal shows, cell by cell, as gpusight's own output left it (as curses keeps its ``curscr``).

A widget that refreshes a region makes Textual re-send every cell of it, although most of them are
already on the terminal: the advice panel's text when one figure in it changed, a process table
redrawn whole when a row came or went, a chart whose columns did not all move. Knowing what each
cell shows lets :mod:`gpusight.ui.terminal.partial_output` skip the cells that would be written unchanged.

A full repaint (Textual's ``LayoutUpdate``, which follows every resize, clear, resume and layout
change) records the whole screen; partial updates record what they write. Before the first full
repaint nothing is known, so everything is written, as without this module.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.cells import cell_len
from rich.color import ColorSystem
from rich.style import Style
from textual.strip import Strip

from gpusight.ui.terminal import line_diff

Cell = tuple[str, str]
"""One cell: its text (``""`` for the right half of a wide character) and the SGR parameters it is drawn with."""

UNKNOWN: Cell = ("\x00", "?")
"""A cell whose content is not known (never equal to one that is drawn)."""


def style_codes(style: Style | None, color_system: ColorSystem) -> str | None:
    """SGR parameters of ``style`` as Textual renders them ("" for none); None for a hyperlink, which is never skipped."""
    if style is None:
        return ""
    if style._link:
        return None
    return style._ansi or Strip.render_ansi(style, color_system)


def strip_cells(
    strip: Strip, color_system: ColorSystem, start: int = 0, end: int | None = None
) -> tuple[list[Cell], list[Style | None], int]:
    """The cells of ``strip`` from the segment holding cell ``start`` to the one holding cell ``end`` (all by
    default), the cell where they start, and the style of each; a hyperlinked cell is :data:`UNKNOWN`."""
    cells: list[Cell] = []
    styles: list[Style | None] = []
    x = 0
    first = 0
    for text, style, control in strip:
        if control:
            continue
        right = x + cell_len(text)
        if right <= start:
            x = first = right
            continue
        if end is not None and x >= end:
            break
        x = right
        code = style_codes(style, color_system)
        if text.isascii() and code is not None:
            cells += [(char, code) for char in text]
            styles += [style] * len(text)
            continue
        styled: list[tuple[str, Style | None]] = []
        line_diff.add_cells(styled, text, style)
        cells += [(char, code) if code is not None else UNKNOWN for char, _ in styled]
        styles += [style] * len(styled)
    return cells, styles, first


class TerminalCells:
    """The terminal's cells as far as gpusight's output says; nothing is known until :meth:`record_screen`."""

    def __init__(self) -> None:
        self.rows: list[list[Cell]] = []
        """Cells of each line, top first; empty before the first full repaint."""

    @property
    def known(self) -> bool:
        """True once a full repaint has been recorded."""
        return bool(self.rows)

    def record_screen(self, lines: Iterable[Iterable[Strip]], width: int, color_system: ColorSystem) -> None:
        """Record a full repaint: each line as the strips drawn side by side from column 0."""
        rows: list[list[Cell]] = []
        for line in lines:
            row: list[Cell] = []
            for strip in line:
                row += strip_cells(strip, color_system)[0]
            del row[width:]
            row += [UNKNOWN] * (width - len(row))
            rows.append(row)
        self.rows = rows

    def forget(self) -> None:
        """Know nothing again (the next full repaint records the screen anew)."""
        self.rows = []


SCREEN = TerminalCells()
"""The one terminal this process draws on."""
