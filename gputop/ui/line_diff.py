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
