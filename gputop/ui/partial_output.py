"""Make Textual send only the requested cells of a partly refreshed line.

Textual 8 cuts each dirty line into the widgets it crosses and, for a partial refresh, crops a
widget's piece at the right edge of the dirty span but always starts writing at the widget's left
edge (a ``TODO`` in ``ChopsUpdate``). A one-character change at the right of a 160-column panel
therefore re-sends the whole line. :class:`SpanChopsUpdate` crops both edges, so a changed number
costs a cursor move and a few cells. :func:`install` puts it in place of ``ChopsUpdate``.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.color import ColorSystem
from rich.console import Console
from rich.control import Control
from textual import _compositor
from textual.strip import Strip

_ORIGINAL = _compositor.ChopsUpdate


class SpanChopsUpdate(_ORIGINAL):
    """A ``ChopsUpdate`` that writes exactly the dirty spans, cropped on both sides."""

    def render_segments(self, console: Console) -> str:
        """The terminal text: a cursor move and the cropped cells for each piece of each dirty span."""
        sequences: list[str] = []
        append = sequences.append
        move_to = Control.move_to
        color_system = console._color_system or ColorSystem.TRUECOLOR
        last_y = self.spans[-1][0]
        for y, x1, x2 in self.spans:
            for end, (x, strip) in zip(self.chop_ends[y], self.chops[y].items(), strict=False):
                if strip is None or x >= x2 or end <= x1:
                    continue
                start = max(x, x1)
                append(move_to(start, y).segment.text)
                if start == x and end <= x2:
                    append(strip.render(console))
                else:
                    append(_render_cells(strip, start - x, min(end, x2) - x, color_system))
            if y != last_y:
                append("\n")
        return "".join(sequences)


def _render_cells(strip: Strip, start: int, end: int, color_system: ColorSystem) -> str:
    """Terminal text of cells ``start`` to ``end`` of ``strip``, without building a cropped ``Strip``
    (each new ``Strip`` sets up seven caches, which made cropping the costliest part of a frame)."""
    render = Strip.render_style
    out: list[str] = []
    x = 0
    for segment in strip:
        text, style, control = segment
        if control:
            continue
        width = cell_len(text)
        right = x + width
        if right <= start:
            x = right
            continue
        if x >= end:
            break
        if x < start or right > end:
            if right > end:
                segment = segment.split_cells(end - x)[0]
            if x < start:
                segment = segment.split_cells(start - x)[1]
            text = segment.text
        out.append(text if style is None else render(style, text, color_system=color_system))
        x = right
    return "".join(out)


def install() -> bool:
    """Use :class:`SpanChopsUpdate` for partial updates; False (and no change) if Textual's internals differ."""
    arguments = _ORIGINAL.__init__.__code__.co_varnames
    if not all(name in arguments for name in ("chops", "spans", "chop_ends")):
        return False
    _compositor.ChopsUpdate = SpanChopsUpdate  # type: ignore[misc]
    return True
