"""The replay's "go to time" dialog: a time typed as ``03:10``, ``2026-11-23 03:10``, ``+1h20m`` or ``90s``."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from gpusight.recordings.replay_time import WHEN_HELP, parse_when, span_text


class GoToDialog(ModalScreen[float | None]):
    """Asks for a time in the recording spanning ``start``..``end``; dismisses with its timestamp, or None."""

    DEFAULT_CSS = """
    GoToDialog { align: center middle; }
    GoToDialog > #goto-box { width: 72; max-width: 100%; height: auto; border: thick $accent;
                             background: $surface; padding: 0 1; }
    GoToDialog #goto-error { color: $error; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, start: float, end: float) -> None:
        super().__init__()
        self.start = start
        """First recorded timestamp."""
        self.end = end
        """Last recorded timestamp."""

    def compose(self) -> ComposeResult:
        """The recording's span, the input and a line for errors."""
        with Vertical(id="goto-box"):
            yield Static(Text(f"Go to: {WHEN_HELP}"), id="goto-help")
            yield Static(Text(f"Recording: {span_text(self.start, self.end)}"), id="goto-span")
            yield Input(placeholder="03:10", id="goto-input")
            yield Static("", id="goto-error")

    def on_mount(self) -> None:
        """Type at once."""
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Go there, or say what is wrong and stay open."""
        event.stop()
        try:
            target = parse_when(event.value, self.start, self.end)
        except ValueError as exc:
            self.query_one("#goto-error", Static).update(Text(str(exc)))
            return
        self.dismiss(target)

    def action_cancel(self) -> None:
        """Close without moving."""
        self.dismiss(None)
