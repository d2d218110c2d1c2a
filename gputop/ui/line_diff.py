"""Redraw only the lines of a line-API widget that changed since the last frame.

A ``refresh()`` makes Textual re-render and re-send the widget's whole region; when a tick changes
one value on one line of a GPU panel, that is most of the terminal output. Comparing the freshly
built strips with the ones on screen and refreshing just the rows that differ sends only those.
"""

from __future__ import annotations

from textual.geometry import Region
from textual.strip import Strip


def changed_rows(old: list[Strip] | None, new: list[Strip]) -> list[int] | None:
    """Row numbers whose strips differ, or None when everything must be redrawn (first build, new height)."""
    if old is None or len(old) != len(new):
        return None
    return [y for y, (before, after) in enumerate(zip(old, new)) if before != after]


def row_regions(rows: list[int], width: int) -> list[Region]:
    """One region per run of consecutive rows, ``width`` cells wide."""
    regions: list[Region] = []
    start = previous = None
    for y in rows:
        if start is not None and previous is not None and y == previous + 1:
            previous = y
            continue
        if start is not None and previous is not None:
            regions.append(Region(0, start, width, previous - start + 1))
        start = previous = y
    if start is not None and previous is not None:
        regions.append(Region(0, start, width, previous - start + 1))
    return regions


class ChangedLinesRefresh:
    """Mixin for line-API widgets that cache their rendered lines in ``_lines`` (built for
    ``_lines_width`` cells by ``_build(width)``): a theme change or ``_invalidate()`` rebuilds
    everything, ``_update_changed_lines()`` refreshes only the rows that differ."""

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
        """Rebuild the lines now and refresh only the rows that differ from those on screen."""
        width = self.size.width
        if not self.is_mounted or width <= 0 or self._lines is None or self._lines_width != width:
            self._invalidate()
            return
        lines = self._build(width)
        rows = changed_rows(self._lines, lines)
        self._lines = lines
        if rows is None:
            self.refresh()
            return
        for region in row_regions(rows, width):
            self.refresh(region)
