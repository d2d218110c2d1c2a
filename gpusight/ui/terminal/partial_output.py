"""Make Textual send only the requested cells of a partly refreshed line, with as few style codes as possible.

Textual 8 cuts each dirty line into the widgets it crosses and, for a partial refresh, crops a
widget's piece at the right edge of the dirty span but always starts writing at the widget's left
edge (a ``TODO`` in ``ChopsUpdate``). A one-character change at the right of a 160-column panel
therefore re-sends the whole line. It also writes every segment with its full style and a reset
(``ESC[…m text ESC[0m``), and a newline after each line although every span starts with an absolute
cursor move. :class:`SpanChopsUpdate` crops both edges, tracks the terminal's current style across
the whole update so that an SGR is sent only where the style changes (as curses does), and sends no
newlines. After a full repaint (:class:`RecordedLayoutUpdate`) it also skips the cells the terminal
already shows (:mod:`gpusight.ui.terminal.cells`), and sends an update's pieces grouped by style when
that is shorter. :func:`activate` puts it in place of ``ChopsUpdate`` unless ``GPUSIGHT_PARTIAL_OUTPUT=0``
turns it off, or Textual's internals differ from the ones it was written for (then Textual's own
output is used and the reason is logged); :func:`status` says which, for ``gpusight --version``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING

import textual
from rich.cells import cell_len
from rich.color import ColorSystem
from rich.console import Console
from rich.style import Style
from textual import _compositor
from textual.strip import Strip

from gpusight import old_name
from gpusight.ui.terminal.cells import SCREEN, UNKNOWN, Cell, TerminalCells, strip_cells, style_codes

if TYPE_CHECKING:
    from textual._compositor import ChopsUpdate as _Stock
    from textual._compositor import LayoutUpdate as _StockLayout
else:  # a Textual without ChopsUpdate gets a class that is never installed (see incompatibility)
    _Stock = getattr(_compositor, "ChopsUpdate", object)
    _StockLayout = getattr(_compositor, "LayoutUpdate", object)

SWITCH = "GPUSIGHT_PARTIAL_OUTPUT"
"""Environment variable that turns the span output off when set to one of :data:`OFF_VALUES`."""

OFF_VALUES = frozenset({"0", "off", "false", "no"})
"""Values of :data:`SWITCH` (any case) that leave Textual's own output in place."""

RESET = "\x1b[0m"
"""SGR that returns the terminal to its default style."""

logger = logging.getLogger(__name__)
"""Where a fallback to Textual's own output is reported."""


class SpanChopsUpdate(_Stock):
    """A ``ChopsUpdate`` that writes exactly the dirty spans, cropped on both sides, with minimal SGR."""

    def render_segments(self, console: Console) -> str:
        """The terminal text: a cursor move and the cropped cells for each piece of each dirty span."""
        return render_spans(self.chops, self.spans, self.chop_ends, console._color_system or ColorSystem.TRUECOLOR)


class RecordedLayoutUpdate(_StockLayout):
    """Textual's full repaint, which also records the screen it draws in :data:`~gpusight.ui.terminal.cells.SCREEN`."""

    def render_segments(self, console: Console) -> str:
        """Textual's own text for the full repaint."""
        if self.region.x or self.region.y:
            SCREEN.forget()
        else:
            SCREEN.record_screen(self.strips, self.region.width, console._color_system or ColorSystem.TRUECOLOR)
        return super().render_segments(console)


def render_spans(
    chops: Sequence[Mapping[int, Strip | None]],
    spans: Sequence[tuple[int, int, int]],
    chop_ends: Sequence[Sequence[int]],
    color_system: ColorSystem,
    screen: TerminalCells = SCREEN,
) -> str:
    """Terminal text for cells ``x1`` to ``x2`` of line ``y`` for each span ``(y, x1, x2)``.

    ``chops[y]`` maps the column where each piece of line ``y`` starts to its strip (None: nothing
    to draw there) and ``chop_ends[y]`` lists where those pieces end, as in Textual's ``ChopsUpdate``.
    The terminal is assumed to be in its default style at the start (Textual's own output always
    ends with a reset) and is left in it at the end.
    Cells that :data:`~gpusight.ui.terminal.cells.SCREEN` (or ``screen``) knows the terminal already
    shows as they would be written are skipped.
    """
    text = _Writes(color_system)
    rows = screen.rows
    for y, x1, x2 in spans:
        row = rows[y] if y < len(rows) else None
        for end, (x, strip) in zip(chop_ends[y], chops[y].items(), strict=False):
            if strip is None or x >= x2 or end <= x1:
                continue
            start = max(x, x1)
            if row is None or not _add_changed(text, row, strip, x, y, start, min(end, x2)):
                text.move_to(start, y)
                if start == x and end <= x2:
                    text.add_strip(strip)
                else:
                    text.add_cells(strip, start - x, min(end, x2) - x)
    return text.text()


def _add_changed(text: _Writes, row: list[Cell], strip: Strip, x: int, y: int, start: int, stop: int) -> bool:
    """Write the cells ``start`` to ``stop`` of ``strip`` (drawn from column ``x`` of line ``y``) that differ from
    ``row`` (the terminal's line), and record them there. False (nothing written or recorded) when the piece has a
    hyperlink or cuts a wide character: then it is written whole and its cells are forgotten."""
    low, high = start - x, stop - x
    cells, styles, first_cell = strip_cells(strip, text.color_system, low, high + 1)
    low, high = low - first_cell, high - first_cell
    piece = cells[low:high]
    if stop > len(row) or len(piece) != high - low or UNKNOWN in piece or piece[0][0] == "" or (high < len(cells) and cells[high][0] == ""):
        row[start:stop] = [UNKNOWN] * (min(stop, len(row)) - start)
        return False
    for first, last in _runs(piece, row[start:stop]):
        text.move_to(start + first, y)
        index = first
        while index < last:
            style = styles[low + index]
            chars = []
            while index < last and styles[low + index] is style:
                chars.append(piece[index][0])
                index += 1
            text.add("".join(chars), style)
    if start > 0 and row[start][0] == "":
        row[start - 1] = UNKNOWN  # a wide character cut in half by what was written
    row[start:stop] = piece
    if stop < len(row) and row[stop][0] == "":
        row[stop] = UNKNOWN
    return True


SKIP_GAP = 4
"""Unchanged cells fewer than this between two changed ones are written again: a cursor move costs about as much."""


def _runs(new: list[Cell], old: list[Cell]) -> list[tuple[int, int]]:
    """Ranges of ``new`` that differ from ``old`` (same length), never starting or ending inside a wide character."""
    runs: list[tuple[int, int]] = []
    length = len(new)
    index = 0
    while index < length:
        if new[index] == old[index]:
            index += 1
            continue
        first = index
        while first > 0 and (new[first][0] == "" or old[first][0] == ""):
            first -= 1
        while index < length and new[index] != old[index]:
            index += 1
        while index < length and (new[index][0] == "" or old[index][0] == ""):
            index += 1
        if runs and first - runs[-1][1] < SKIP_GAP:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((first, index))
    return runs


Write = tuple[int, int, str, "Style | None"]
"""Text to write in a style at column ``x`` of line ``y``: ``(x, y, text, style)``."""


class _Writes:
    """The pieces of text an update writes, with where each goes, in the order they were found."""

    def __init__(self, color_system: ColorSystem) -> None:
        self.color_system = color_system
        """Colour system the styles are rendered for."""
        self.writes: list[Write] = []
        """The pieces so far."""
        self._x = 0
        self._y = 0

    def move_to(self, x: int, y: int) -> None:
        """The next piece goes at column ``x`` of line ``y`` (0-based)."""
        self._x, self._y = x, y

    def add(self, text: str, style: Style | None) -> None:
        """Write ``text`` in ``style`` where the last piece ended (or where :meth:`move_to` said)."""
        self.writes.append((self._x, self._y, text, style))
        self._x += cell_len(text)

    def add_strip(self, strip: Strip) -> None:
        """Write all of ``strip``."""
        add = self.add
        for text, style, control in strip:
            if text and not control:
                add(text, style)

    def add_cells(self, strip: Strip, start: int, end: int) -> None:
        """Write cells ``start`` to ``end`` of ``strip``, without building a cropped ``Strip``
        (each new ``Strip`` sets up seven caches, which made cropping the costliest part of a frame)."""
        x = 0
        for segment in strip:
            text, style, control = segment
            if control:
                continue
            right = x + cell_len(text)
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
            if text:
                self.add(text, style)
            x = right

    def text(self) -> str:
        """The terminal text for all pieces: in the order found, or grouped by style when that is shorter
        (the charts' colours alternate along a line but repeat down the panel)."""
        in_order = _StyledText.of(self.writes, self.color_system)
        if len(self.writes) < 3 or any(style is not None and style._link for _, _, _, style in self.writes):
            return in_order
        first_seen: dict[str, int] = {}
        keys = [first_seen.setdefault(style_codes(style, self.color_system) or "", index)
                for index, (_, _, _, style) in enumerate(self.writes)]
        grouped = [self.writes[index] for index in sorted(range(len(self.writes)), key=keys.__getitem__)]
        by_style = _StyledText.of(grouped, self.color_system)
        return by_style if len(by_style.encode()) < len(in_order.encode()) else in_order


class _StyledText:
    """Terminal text built piece by piece, with as few control bytes as curses would send.

    An SGR is added only where the style differs from the terminal's, and then only the parts
    that differ (a new foreground alone is ``ESC[38;5;71m``) unless an attribute must be turned
    off, which takes a full ``ESC[0;…m``. A move along the same line after text whose width is
    certain (ASCII, box drawing and blocks) is a relative ``ESC[nC`` instead of an absolute move.
    """

    def __init__(self, color_system: ColorSystem) -> None:
        self.parts: list[str] = []
        """The text so far, in pieces."""
        self.color_system = color_system
        """Colour system the styles are rendered for."""
        self.codes = ""
        """SGR parameters in effect on the terminal after ``parts`` ("": the default style)."""
        self._cursor: tuple[int, int] | None = None

    def move_to(self, x: int, y: int) -> None:
        """Move the cursor to column ``x`` of line ``y`` (0-based); the style is kept."""
        cursor = self._cursor
        if cursor is not None and cursor[1] == y and cursor[0] <= x:
            if x > cursor[0]:
                self.parts.append(f"\x1b[{x - cursor[0]}C")
        else:
            self.parts.append(f"\x1b[{y + 1};{x + 1}H")
        self._cursor = (x, y)

    def add(self, text: str, style: Style | None) -> None:
        """Write ``text`` in ``style``, changing the terminal's style first only when it differs."""
        if style is None:
            codes = ""
        elif style._link:
            self._add_link(text, style)
            return
        else:
            codes = style._ansi or Strip.render_ansi(style, self.color_system)
        if codes != self.codes:
            self.parts.append(sgr_change(self.codes, codes))
            self.codes = codes
        self.parts.append(text)
        cursor = self._cursor
        self._cursor = (cursor[0] + len(text), cursor[1]) if cursor is not None and _narrow_for_sure(text) else None

    def _add_link(self, text: str, style: Style) -> None:
        """Write a hyperlinked segment as Textual does (style, text and reset inside the link), from the default style."""
        if self.codes:
            self.parts.append(RESET)
            self.codes = ""
        self.parts.append(Strip.render_style(style, text, self.color_system))
        self._cursor = None

    def finish(self) -> str:
        """The whole text, ending with a reset when a style other than the default is in effect."""
        if self.codes:
            self.parts.append(RESET)
        return "".join(self.parts)

    @classmethod
    def of(cls, writes: list[Write], color_system: ColorSystem) -> str:
        """The terminal text for ``writes``, in their order."""
        text = cls(color_system)
        end: tuple[int, int] | None = None
        for x, y, piece, style in writes:
            if (x, y) != end:  # a piece that continues the last one needs no move
                text.move_to(x, y)
            text.add(piece, style)
            end = (x + cell_len(piece), y)
        return text.finish()


_BOX_AND_BLOCKS = frozenset(map(chr, range(0x2500, 0x25A0)))
"""Box-drawing and block characters: one cell wherever Textual's own borders and charts are drawn right."""


def _narrow_for_sure(text: str) -> bool:
    """True when every character of ``text`` takes one cell on any terminal Textual draws correctly on."""
    return text.isascii() or all(char.isascii() or char in _BOX_AND_BLOCKS for char in text)


_Sgr = tuple[tuple[str, ...], str, str]
"""SGR parameters split into (attributes, foreground, background); "" for a default colour."""


@lru_cache(maxsize=256)
def _split_sgr(codes: str) -> _Sgr:
    """``"1;38;5;253;48;5;233"`` as ``(("1",), "38;5;253", "48;5;233")``."""
    tokens = codes.split(";") if codes else []
    attributes: list[str] = []
    colours = {"fg": "", "bg": ""}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token in ("38", "48"):
            size = 3 if tokens[index + 1 : index + 2] == ["5"] else 5
            colours["fg" if token == "38" else "bg"] = ";".join(tokens[index : index + size])
            index += size
            continue
        number = int(token) if token.isdigit() else -1
        if 30 <= number <= 39 or 90 <= number <= 97:
            colours["fg"] = token
        elif 40 <= number <= 49 or 100 <= number <= 107:
            colours["bg"] = token
        else:
            attributes.append(token)
        index += 1
    return tuple(attributes), colours["fg"], colours["bg"]


ATTRIBUTE_OFF = {"1": "22", "2": "22", "3": "23", "4": "24", "21": "24", "5": "25", "6": "25", "7": "27", "8": "28",
                 "9": "29", "51": "54", "52": "54", "53": "55"}
"""The SGR parameter that turns each attribute off (22 ends both bold and dim, 24 both underlines...)."""


@lru_cache(maxsize=1024)
def sgr_change(current: str, codes: str) -> str:
    """The shortest SGR taking the terminal from parameters ``current`` to ``codes`` (both as Textual renders them):
    only what changes, turning attributes off with their own codes (``22`` for bold), or a reset and all of ``codes``."""
    if not codes:
        return RESET
    old_attributes, old_fg, old_bg = _split_sgr(current)
    attributes, fg, bg = _split_sgr(codes)
    from_default = f"\x1b[0;{codes}m"
    gone = [attribute for attribute in old_attributes if attribute not in attributes]
    offs = [ATTRIBUTE_OFF.get(attribute) for attribute in gone]
    if None in offs:  # an attribute with no code of its own to turn it off: start from the default
        return from_default
    changes = list(dict.fromkeys(off for off in offs if off is not None))
    turned_off = {attribute for attribute, off in ATTRIBUTE_OFF.items() if off in changes}
    changes += [attribute for attribute in attributes if attribute not in old_attributes or attribute in turned_off]
    if fg != old_fg:
        changes.append(fg or "39")
    if bg != old_bg:
        changes.append(bg or "49")
    change = f"\x1b[{';'.join(changes)}m"
    return change if not gone or len(change) < len(from_default) else from_default


def switched_off(environ: Mapping[str, str] = os.environ) -> bool:
    """True when :data:`SWITCH` asks for Textual's own output."""
    return (old_name.environment_value(SWITCH, environ) or "").strip().lower() in OFF_VALUES


def incompatibility(module: ModuleType = _compositor) -> str | None:
    """Why :class:`SpanChopsUpdate` cannot stand in for ``module.ChopsUpdate``; None when it can (or already does).

    ``module`` is ``textual._compositor``, or a stand-in for it in tests.
    """
    stock = getattr(module, "ChopsUpdate", None)
    if stock is None:
        return f"{module.__name__} has no ChopsUpdate"
    if stock is SpanChopsUpdate:
        return None
    try:
        probe = stock(chops=[], spans=[], chop_ends=[])
    except Exception as exc:
        return f"ChopsUpdate(chops=, spans=, chop_ends=) fails: {exc}"
    missing = [name for name in ("chops", "spans", "chop_ends", "render_segments") if not hasattr(probe, name)]
    if missing:
        return f"ChopsUpdate has no {', '.join(missing)}"
    if stock is not _Stock:
        return "ChopsUpdate is not the class gpusight extends (replaced by another)"
    return None


def install(module: ModuleType = _compositor) -> str | None:
    """Put :class:`SpanChopsUpdate` in place of ``module.ChopsUpdate``; returns why not (changing nothing) when it cannot."""
    reason = incompatibility(module)
    if reason is None:
        _put(module, SpanChopsUpdate)
    return reason


def activate(environ: Mapping[str, str] = os.environ, module: ModuleType = _compositor) -> bool:
    """Install the span output unless :data:`SWITCH` turns it off (then Textual's own class is put back);
    a fallback because Textual's internals differ is logged. Returns True when the span output is in use."""
    if switched_off(environ):
        if getattr(module, "ChopsUpdate", None) is SpanChopsUpdate:
            _put(module, _Stock)
        return False
    reason = install(module)
    if reason is not None:
        logger.warning("gpusight: partial output %s; Textual's own output is used", _unavailable(reason))
    return reason is None


def status(environ: Mapping[str, str] = os.environ, module: ModuleType = _compositor) -> str:
    """What :func:`activate` does or did here, in a few words: ``active``, ``off (…)`` or ``unavailable (…)``."""
    if switched_off(environ):
        name = old_name.environment_name(SWITCH, environ)
        return f"off ({name}={environ[name]})"
    reason = incompatibility(module)
    return "active" if reason is None else _unavailable(reason)


def _put(module: ModuleType, update_class: type[_Stock]) -> None:
    """Make ``module`` (Textual's compositor) build its partial updates with ``update_class``, and its full repaints
    with :class:`RecordedLayoutUpdate` alongside :class:`SpanChopsUpdate` (Textual's own class otherwise; a
    ``LayoutUpdate`` other than Textual's own is left alone, and then no cell is ever skipped)."""
    module.ChopsUpdate = update_class  # type: ignore[attr-defined]
    if getattr(module, "LayoutUpdate", None) in (_StockLayout, RecordedLayoutUpdate):
        module.LayoutUpdate = RecordedLayoutUpdate if update_class is SpanChopsUpdate else _StockLayout  # type: ignore[attr-defined]
    SCREEN.forget()


def _unavailable(reason: str) -> str:
    """The status for a Textual whose internals differ."""
    minor = ".".join(textual.__version__.split(".")[:2])
    return f"unavailable (Textual {minor} internals differ: {reason})"
