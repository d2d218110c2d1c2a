"""Ending the app when its terminal is gone (SSH link dropped, tmux session killed, stdin at EOF).

Textual's input thread spins at 100 % CPU when stdin reaches end of file, and Textual has no
default handling of SIGHUP. A daemon thread checks the terminal at once and then waits in
``poll()`` for a hangup, so a terminal that goes away is noticed immediately rather than after a
period of spinning (it re-checks at least once a second for faults ``poll()`` does not report).
When the terminal is gone it asks the app to exit and, should the event loop not finish within a
grace period, ends the process with ``os._exit``.
"""

from __future__ import annotations

import os
import select
import termios
import threading
from collections.abc import Callable

CHECK_PERIOD = 1.0
"""Seconds between terminal checks."""

EXIT_GRACE = 3.0
"""Seconds the app gets to exit cleanly before the process is ended."""

HANGUP_EXIT_STATUS = 129
"""Exit status after a hangup (128 + SIGHUP), the shell convention."""

_DEAD_EVENTS = select.POLLHUP | select.POLLERR | select.POLLNVAL


def terminal_alive(fd: int) -> bool:
    """True while ``fd`` is a terminal that has not hung up.

    A hung-up terminal reports POLLHUP (or fails ``tcgetattr`` with EIO); a closed or
    non-terminal descriptor counts as gone.
    """
    try:
        if not os.isatty(fd):
            return False
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        for _, mask in poller.poll(0):
            if mask & _DEAD_EVENTS:
                return False
        termios.tcgetattr(fd)
    except (OSError, termios.error, ValueError):
        return False
    return True


def wait_for_hangup(fd: int, seconds: float) -> bool:
    """Block until ``fd`` reports a hangup or an error (True), or ``seconds`` have passed (False)."""
    poller = select.poll()
    try:
        poller.register(fd, 0)  # no events asked: only POLLHUP/POLLERR/POLLNVAL wake it
        return bool(poller.poll(max(0, int(seconds * 1000))))
    except (OSError, ValueError):
        return True


def force_exit_later(seconds: float = EXIT_GRACE, status: int = HANGUP_EXIT_STATUS) -> threading.Thread:
    """End the process with ``status`` after ``seconds`` unless it has exited by then (daemon timer)."""

    def expire() -> None:
        threading.Event().wait(seconds)
        os._exit(status)

    thread = threading.Thread(target=expire, name="gpusight-exit-deadline", daemon=True)
    thread.start()
    return thread


class TerminalWatchdog:
    """Watches a terminal descriptor (hangups at once, other faults within ``period``) and calls ``on_lost`` once when it is gone.

    ``on_lost`` runs on the watchdog thread, so it must be thread-safe (e.g. ``App.post_message``).
    After calling it the watchdog arms :func:`force_exit_later` unless ``force_exit`` is False.
    """

    def __init__(
        self,
        on_lost: Callable[[], None],
        fd: int = 0,
        period: float = CHECK_PERIOD,
        *,
        force_exit: bool = True,
    ) -> None:
        self.on_lost = on_lost
        """Called once when the terminal is gone."""
        self.fd = fd
        """Descriptor checked (stdin by default)."""
        self.period = period
        """Longest time between two checks."""
        self.force_exit = force_exit
        """End the process if the app has not exited within the grace period."""
        self.lost = threading.Event()
        """Set once the terminal was found gone."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start checking on a daemon thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gpusight-tty-watchdog", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop checking (an already armed exit deadline stays armed)."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not terminal_alive(self.fd):
                self.lost.set()
                self.on_lost()
                if self.force_exit:
                    force_exit_later()
                return
            if wait_for_hangup(self.fd, self.period) and terminal_alive(self.fd):
                self._stop.wait(self.period)  # an event poll() keeps reporting must not make this loop spin
