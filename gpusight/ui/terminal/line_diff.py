"""Redraw only the cells of a line-API widget that changed since the last frame.

A ``refresh()`` makes Textual re-render and re-send the widget's whole region. When a tick changes
one number on one line, comparing the freshly built strips with the ones on screen and refreshing
just the changed cell spans sends a few bytes instead of the whole panel (with
:mod:`gpusight.ui.terminal.partial_output`, which makes Textual honour the left edge of such spans too).
"""

from __future__ import annotations

from rich.cells import get_character_cell_size
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

MERGE_GAP = 8
"""Changed runs closer than this many cells are sent as one span: a cursor move costs about as much."""

Cell = tuple[str, "Style | None"]
"""One terminal cell: its text (``""`` for the right half of a wide character) and style."""


def strip_cells(strip: Strip) -> list[Cell]:
    """The cells of ``strip``; a wide character is followed by a ``""`` placeholder cell."""
    cells: list[Cell] = []
    for text, style, control in strip:
        if not control:
            add_cells(cells, text, style)
    return cells


def add_cells(cells: list[Cell], text: str, style: Style | None) -> None:
    """Append the cells of ``text`` in ``style`` to ``cells`` (a zero-width character joins the cell before it)."""
    if text.isascii():
        cells.extend([(char, style) for char in text])
        return
    append = cells.append
    for char in text:
        size = get_character_cell_size(char)
        if size == 0:
            if cells:
                cells[-1] = (cells[-1][0] + char, cells[-1][1])
            continue
        append((char, style))
        if size == 2:
            append(("", style))


def changed_spans(old: Strip, new: Strip) -> list[tuple[int, int]]:
    """Cell ranges ``[start, end)`` where ``new`` differs from ``old``, never splitting a wide character."""
    if old == new:
        return []
    runs = _same_layout_runs(old, new)
    if runs is None:
        runs = _cell_runs(strip_cells(old), strip_cells(new))
    return _merged(runs)


def _same_layout_runs(old: Strip, new: Strip) -> list[tuple[int, int]] | None:
    """Changed runs when both strips are the same ASCII segments with other texts (the usual tick:
    a number changes in place); None when the layout differs and cells must be compared one by one."""
    before, after = list(old), list(new)
    if len(before) != len(after):
        return None
    runs: list[tuple[int, int]] = []
    x = 0
    for (text_a, style_a, control_a), (text_b, style_b, control_b) in zip(before, after, strict=False):
        if control_a or control_b or len(text_a) != len(text_b) or not (text_a.isascii() and text_b.isascii()):
            return None
        if style_a != style_b:
            runs.append((x, x + len(text_a)))
        elif text_a != text_b:
            runs.extend((x + start, x + end) for start, end in _text_runs(text_a, text_b))
        x += len(text_a)
    return runs


def _text_runs(a: str, b: str) -> list[tuple[int, int]]:
    """Runs of differing characters of two equally long strings."""
    runs: list[tuple[int, int]] = []
    start = None
    for index, (char_a, char_b) in enumerate(zip(a, b, strict=False)):
        if char_a != char_b:
            if start is None:
                start = index
        elif start is not None:
            runs.append((start, index))
            start = None
    if start is not None:
        runs.append((start, len(a)))
    return runs


def _cell_runs(before: list[Cell], after: list[Cell]) -> list[tuple[int, int]]:
    """Runs of differing cells, then each widened to whole wide characters."""
    length = max(len(before), len(after))
    shared = min(len(before), len(after))
    runs: list[tuple[int, int]] = []
    x = 0
    while x < length:
        if x < shared and before[x] == after[x]:
            x += 1
            continue
        start = x
        while x < length and not (x < shared and before[x] == after[x]):
            x += 1
        runs.append(_whole_characters((start, x), before, after))
    return runs


def _merged(runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``runs`` (in order) with those less than ``MERGE_GAP`` cells apart joined."""
    spans: list[tuple[int, int]] = []
    for start, end in runs:
        if spans and start - spans[-1][1] < MERGE_GAP:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return spans


def _whole_characters(span: tuple[int, int], before: list[Cell], after: list[Cell]) -> tuple[int, int]:
    """Widen ``span`` so it neither starts on nor ends inside a wide character, in either version."""
    start, end = span

    def placeholder(cells: list[Cell], x: int) -> bool:
        return 0 <= x < len(cells) and cells[x][0] == ""

    while start > 0 and (placeholder(before, start) or placeholder(after, start)):
        start -= 1
    while placeholder(before, end) or placeholder(after, end):
        end += 1
    return start, end


def line_regions(y: int, old: Strip | None, new: Strip, width: int) -> list[Region]:
    """Regions of line ``y`` to refresh when ``old`` becomes ``new`` (the whole line without ``old``)."""
    if old is None:
        return [Region(0, y, width, 1)]
    if old is new:  # a line the widget kept from its cache
        return []
    return [Region(start, y, end - start, 1) for start, end in changed_spans(old, new)]


def refresh_regions(widget: Widget, regions: list[Region]) -> None:
    """Refresh ``regions`` of ``widget``, and nothing when there are none (a bare ``refresh()`` repaints all).

    Textual 8.2 also adds every partly refreshed region to ``Widget._dirty_regions``, a set it never
    reads and empties only on a whole refresh; with a different span changing on every tick it grew
    by the distinct spans of a whole day. It is emptied here, which changes nothing Textual draws.
    """
    if regions:
        widget.refresh(*regions)
        widget._dirty_regions.clear()


class ChangedLinesRefresh:
    """Mixin for line-API widgets that cache their rendered lines in ``_lines`` (built for
    ``_lines_width`` cells by ``_build(width)``): a theme change or ``_invalidate()`` rebuilds
    everything, ``_update_changed_lines()`` refreshes only the cells that differ."""

    _lines: list[Strip] | None
    _lines_width: int

    def notify_style_update(self) -> None:
        """Redraw with the new theme."""
        super().notify_style_update()  # type: ignore[misc]
        self._lines = None

    def _invalidate(self) -> None:
        self._lines = None
        self.refresh()  # type: ignore[attr-defined]

    def _update_changed_lines(self) -> None:
        """Rebuild the lines now and refresh only the cells that differ from those on screen."""
        width = self.size.width  # type: ignore[attr-defined]
        old = self._lines
        if not self.is_mounted or width <= 0 or old is None or self._lines_width != width:  # type: ignore[attr-defined]
            self._invalidate()
            return
        lines = self._build(width)  # type: ignore[attr-defined]
        self._lines = lines
        if len(lines) != len(old):
            self.refresh()  # type: ignore[attr-defined]
            return
        regions = [region for y, (a, b) in enumerate(zip(old, lines, strict=False)) for region in line_regions(y, a, b, width)]
        refresh_regions(self, regions)  # type: ignore[arg-type]
