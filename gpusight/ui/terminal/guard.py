"""Leaving cleanly when the terminal goes, or on Ctrl+C: the shared base of the monitor and the cluster view.

SIGHUP and SIGTERM make the app exit with 128 + the signal's number, and a
:class:`~gpusight.ui.terminal.watchdog.TerminalWatchdog` posts :class:`~gpusight.ui.messages.TerminalLost` when the
terminal hangs up or stdin reaches end of file. Either way the process ends anyway should the exit stall
(:func:`~gpusight.ui.terminal.watchdog.force_exit_later`). Ctrl+C (the ``interrupt`` action) quits unless text is
selected, which Textual's copy then takes.
"""

from __future__ import annotations

import asyncio
import signal

from textual.actions import SkipAction
from textual.app import App
from textual.widgets import Input

from gpusight.ui.messages import TerminalLost
from gpusight.ui.terminal.watchdog import HANGUP_EXIT_STATUS, TerminalWatchdog, force_exit_later

TERMINATE_EXIT_STATUS = 143
"""Exit status after SIGTERM (128 + 15)."""


class TerminalGuardedApp(App[None]):
    """An app that exits on Ctrl+C, and on SIGHUP, SIGTERM or a lost terminal once :meth:`_install_terminal_guards` ran.

    Subclasses call :meth:`_install_terminal_guards` on mount and :meth:`_remove_terminal_guards` on unmount.
    """

    _watchdog: TerminalWatchdog | None = None
    """Watches the terminal while the guards are installed (None in headless mode)."""

    def _install_terminal_guards(self) -> None:
        """Exit cleanly on SIGHUP/SIGTERM and when the terminal disappears (nothing in headless mode)."""
        if self.is_headless:
            return
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, self._on_hangup_signal, HANGUP_EXIT_STATUS)
        loop.add_signal_handler(signal.SIGTERM, self._on_hangup_signal, TERMINATE_EXIT_STATUS)
        self._watchdog = TerminalWatchdog(self._report_terminal_lost)
        self._watchdog.start()

    def _remove_terminal_guards(self) -> None:
        """Stop watching the terminal."""
        if self._watchdog is not None:
            self._watchdog.stop()

    def _report_terminal_lost(self) -> None:
        """Watchdog-thread callback: tell the UI thread the terminal is gone."""
        self.post_message(TerminalLost())

    def _on_hangup_signal(self, status: int) -> None:
        """SIGHUP or SIGTERM: exit with ``status``, and end the process should that stall."""
        self.exit(return_code=status)
        force_exit_later(status=status)

    def on_terminal_lost(self, message: TerminalLost) -> None:
        """The watchdog found the terminal gone: leave (it ends the process if this stalls)."""
        self.exit(return_code=HANGUP_EXIT_STATUS)

    def action_interrupt(self) -> None:
        """Ctrl+C: quit from any screen or dialog, unless text is selected (Textual's copy then takes the key)."""
        focused = self.focused
        if (isinstance(focused, Input) and focused.selected_text) or self.screen.get_selected_text():
            raise SkipAction()
        self.exit()
