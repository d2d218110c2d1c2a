"""A one-row cursor for the line-API tables (the process table and the cluster table).

Both tables draw a header on line 0 and their rows below it, from the scroll position, one line per row;
the row under the cursor is drawn with a component style laid over it. :class:`RowCursorView` holds what
they share: the key bindings, moving the cursor (scrolling it into view and repainting only the two rows
concerned), keeping it on the same row across updates, and styling the cursor row's line.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import ClassVar, Generic, Protocol, TypeVar

from rich.segment import Segment
from textual.binding import Binding, BindingType
from textual.geometry import Region
from textual.scroll_view import ScrollView
from textual.strip import Strip

KeyT = TypeVar("KeyT", bound=Hashable)
"""The type of a table's row keys."""

KeyT_co = TypeVar("KeyT_co", bound=Hashable, covariant=True)
"""The type of a row's key, as :class:`KeyedRow` gives it."""


class KeyedRow(Protocol[KeyT_co]):
    """A table row as the cursor sees it: something with a key that stays the same across updates."""

    @property
    def key(self) -> KeyT_co:
        """The row's identity (the cursor follows it when rows move)."""


class RowCursorView(ScrollView, Generic[KeyT]):
    """A scroll view of rows keyed by ``KeyT`` under a one-line header, with a cursor row.

    Subclasses set :attr:`CURSOR_COMPONENT` (and list it in their ``COMPONENT_CLASSES``), and keep
    ``_rows``, ``_cursor``, ``_cursor_key`` and ``_line_width`` up to date; they call :meth:`_place_cursor`
    after rebuilding the rows and pass each row's line through :meth:`_cursor_strip` in ``render_line``.
    """

    CURSOR_COMPONENT: ClassVar[str] = ""
    """The component class whose style is laid over the cursor row."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "cursor_first", "First", show=False),
        Binding("end", "cursor_last", "Last", show=False),
    ]

    _rows: Sequence[KeyedRow[KeyT]]
    """The rows, top to bottom (line ``i + 1`` of the content shows row ``i``)."""
    _cursor: int
    """Index of the cursor row (0 while there is no row)."""
    _cursor_key: KeyT | None
    """Key of the cursor row, to find it again after the rows are rebuilt (None while there is no row)."""
    _line_width: int
    """Cells in one row line."""

    def _cursor_fallback(self, key: KeyT) -> KeyT | None:
        """The key of the row the cursor goes to when the row keyed ``key`` is gone (None: clamp the index)."""
        return None

    def _row_index(self, key: KeyT | None) -> int | None:
        """Index of the row keyed ``key``, or None when there is none."""
        if key is None:
            return None
        return next((i for i, row in enumerate(self._rows) if row.key == key), None)

    def _place_cursor(self) -> None:
        """Keep the cursor on the same row when it is still shown, else on :meth:`_cursor_fallback`'s, else clamp it."""
        index = self._row_index(self._cursor_key)
        if index is None and self._cursor_key is not None:
            index = self._row_index(self._cursor_fallback(self._cursor_key))
        if index is None:
            index = min(self._cursor, max(0, len(self._rows) - 1))
        self._cursor = index
        self._cursor_key = self._rows[index].key if self._rows else None

    def _cursor_strip(self, index: int, strip: Strip) -> Strip:
        """Row ``index``'s line ``strip``, with the cursor style laid over it when the cursor is on that row."""
        if index != self._cursor:
            return strip
        cursor = self.get_component_rich_style(self.CURSOR_COMPONENT, partial=True)
        return Strip(list(Segment.apply_style(iter(strip), None, cursor)), strip.cell_length)

    def _refresh_row(self, index: int) -> None:
        """Repaint row ``index``'s line (nothing when it is above the viewport)."""
        top = int(self.scroll_offset.y)
        if top <= index:
            self.refresh(Region(0, index - top + 1, self._line_width, 1))

    def move_cursor(self, index: int) -> None:
        """Put the cursor on row ``index`` (clamped) and scroll it into view."""
        if not self._rows:
            return
        index = max(0, min(index, len(self._rows) - 1))
        self._refresh_row(self._cursor)
        self._cursor = index
        self._cursor_key = self._rows[index].key
        visible = max(1, self.scrollable_content_region.height - 1)
        top = int(self.scroll_offset.y)
        if index < top:
            self.scroll_to(y=index, animate=False, immediate=True)
        elif index >= top + visible:
            self.scroll_to(y=index - visible + 1, animate=False, immediate=True)
        self._refresh_row(index)

    def _page(self) -> int:
        """Rows one page key moves: the viewport's rows less one, so one row stays in sight."""
        return max(1, self.scrollable_content_region.height - 2)

    def action_cursor_up(self) -> None:
        """Move the cursor one row up."""
        self.move_cursor(self._cursor - 1)

    def action_cursor_down(self) -> None:
        """Move the cursor one row down."""
        self.move_cursor(self._cursor + 1)

    def action_page_up(self) -> None:
        """Move the cursor one page up."""
        self.move_cursor(self._cursor - self._page())

    def action_page_down(self) -> None:
        """Move the cursor one page down."""
        self.move_cursor(self._cursor + self._page())

    def action_cursor_first(self) -> None:
        """Move the cursor to the first row."""
        self.move_cursor(0)

    def action_cursor_last(self) -> None:
        """Move the cursor to the last row."""
        self.move_cursor(len(self._rows) - 1)
