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


class HelpScreen(ModalScreen[None]):
    """A dialog listing ``(key, description)`` rows; Escape or ``?`` closes it."""

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
            box.border_subtitle = "Esc closes"
            yield Static(table, id="help-keys")
            yield Static(Text(ABOUT), id="help-about")

