"""The ``?`` help screen: every key and what it does."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

ABOUT = (
    "Charts use fixed scales: 0-100 % for utilization, 0-total for memory, 0-limit for power, "
    "0-100 C for temperature, and a round number above the peak for PCIe. N/A means the GPU or "
    "driver does not report the value (never zero)."
)
"""What the help screen says about reading the charts."""


SCROLL_HINT = "Up Down PgUp PgDn scroll, Esc closes"
"""The box's bottom line when the keys do not fit: they scroll from the first key press (ASCII, for ``--ascii``)."""

CLOSE_HINT = "Esc closes"
"""The box's bottom line when everything fits."""


class HelpScreen(ModalScreen[None]):
    """A dialog listing ``(key, description)`` rows; Escape or ``?`` closes it.

    The list has the focus from the start, so the arrows, PgUp, PgDn, Home and End scroll it; when it
    does not fit, its scrollbar shows and its bottom line says how to scroll.
    """

    AUTO_FOCUS = "#help-box"
    """The scrolling list takes the keys from the start."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close", show=False),
    ]

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        super().__init__()
        self.rows = rows
        """The keys and their descriptions, in display order."""

    def compose(self) -> ComposeResult:
        """The key table and a note on the charts."""
        table = Table.grid(padding=(0, 2))
        table.add_column(no_wrap=True, style="bold")
        table.add_column()
        for key, description in self.rows:
            table.add_row(Text(key), Text(description))
        with VerticalScroll(id="help-box") as box:
            box.border_title = "gpusight keys"
            box.border_subtitle = CLOSE_HINT
            yield Static(table, id="help-keys")
            yield Static(Text(ABOUT), id="help-about")


    def on_mount(self) -> None:
        """Say whether the list scrolls once it is laid out."""
        self.call_after_refresh(self._show_hint)

    def on_resize(self) -> None:
        """The terminal changed size: the list may scroll now, or no longer."""
        self.call_after_refresh(self._show_hint)

    def _show_hint(self) -> None:
        box = self.query_one("#help-box", VerticalScroll)
        box.border_subtitle = SCROLL_HINT if box.max_scroll_y > 0 else CLOSE_HINT
