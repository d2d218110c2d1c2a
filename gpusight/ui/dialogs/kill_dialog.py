"""A modal dialog that asks before signalling a process, then signals it through :mod:`gpusight.procctl`."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, RadioButton, RadioSet, Static

from gpusight import procctl
from gpusight.snapshot.model import ProcessSample
from gpusight.textsafe import safe_text


class KillDialog(ModalScreen[str | None]):
    """Confirm a signal to ``process``: SIGTERM (default), SIGINT or SIGKILL.

    Only Confirm sends anything; the screen then dismisses with the result line (or the refusal
    message). Cancel or Escape dismisses with None. Fully usable from the keyboard: Tab moves between
    the signal choice and the buttons, arrows and Space pick a signal, Enter presses a button.
    """

    DEFAULT_CSS = """
    KillDialog { align: center middle; }
    KillDialog > #kill-box {
        width: 72;
        max-width: 100%;
        height: auto;
        border: thick $error;
        background: $surface;
        padding: 1 2;
    }
    KillDialog #kill-signals { height: auto; width: 100%; margin: 1 0; }
    KillDialog #kill-buttons { height: auto; width: 100%; align-horizontal: right; }
    KillDialog #kill-buttons Button { margin-left: 2; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, process: ProcessSample) -> None:
        """Prepare the dialog for ``process`` (its pid and create_time identify it when signalling)."""
        super().__init__()
        self.process = process
        """The process to signal."""

    def compose(self) -> ComposeResult:
        """The process facts, the signal choice and the two buttons."""
        p = self.process
        command = safe_text(p.cmdline or p.name, 200) or "N/A"
        with Vertical(id="kill-box"):
            yield Static(Text(f"Send a signal to PID {p.pid}?", style="bold"), id="kill-title")
            yield Static(Text(f"User:    {safe_text(p.user, 40) or 'N/A'}"), id="kill-user")
            yield Static(Text(f"Command: {command}"), id="kill-command")
            with RadioSet(id="kill-signals"):
                for index, sig in enumerate(procctl.OFFERED_SIGNALS):
                    yield RadioButton(procctl.signal_name(sig), value=index == 0)
            with Horizontal(id="kill-buttons"):
                yield Button("Confirm", variant="error", id="kill-confirm")
                yield Button("Cancel", id="kill-cancel")

    def on_mount(self) -> None:
        """Start on the signal choice, so a stray Enter does not confirm."""
        self.query_one(RadioSet).focus()

    def chosen_signal(self) -> int:
        """The signal currently selected (SIGTERM until the user picks another)."""
        index = self.query_one(RadioSet).pressed_index
        return procctl.OFFERED_SIGNALS[max(0, index)]

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Confirm signals the process and dismisses with the outcome; Cancel dismisses with None."""
        event.stop()
        if event.button.id != "kill-confirm":
            self.dismiss(None)
            return
        try:
            result = procctl.send_signal(self.process.pid, self.process.create_time, self.chosen_signal())
        except procctl.SignalRefused as refused:
            result = refused.message
        self.dismiss(result)

    def action_cancel(self) -> None:
        """Close without signalling."""
        self.dismiss(None)
