"""Sending a signal to a process shown in the table, with the checks that make it safe.

The table shows a process as it was at the last poll; by the time the user confirms, the PID may
belong to another process. :func:`send_signal` therefore re-reads the process's start time right
before signalling and refuses on any doubt: gpusight itself and its ancestors, PID 1, other users'
processes (unless running as root), a reused PID, an unknown start time, a vanished process.
"""

from __future__ import annotations

import os
import signal

import psutil

from gpusight.textsafe import safe_text

CREATE_TIME_TOLERANCE = 0.01
"""Seconds by which the recorded and current start times may differ for the same process."""

OFFERED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGKILL)
"""Signals the kill dialog offers, the default first."""


class SignalRefused(Exception):
    """The signal was not sent; the message (one line) says why."""

    def __init__(self, message: str) -> None:
        """Carry the one-line ``message`` shown to the user."""
        super().__init__(message)
        self.message = message
        """Why the signal was not sent."""


def protected_pids() -> set[int]:
    """PIDs never signalled: this process, all its ancestors and PID 1."""
    protected = {1, os.getpid()}
    try:
        protected.update(parent.pid for parent in psutil.Process().parents())
    except psutil.Error:
        protected.add(os.getppid())
    return protected


def signal_name(sig: int) -> str:
    """``"SIGTERM"`` for 15 and so on; ``"signal N"`` for numbers without a name."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def send_signal(pid: int, create_time: float | None, sig: int) -> str:
    """Send ``sig`` to ``pid`` if it is still the process that started at ``create_time``.

    Returns a one-line description of what was done. Raises :class:`SignalRefused` with a
    one-line reason when the signal is not sent.
    """
    name = signal_name(sig)
    if pid <= 0:
        raise SignalRefused(f"PID {pid} is not a process; {name} not sent")
    if pid in protected_pids():
        raise SignalRefused(f"PID {pid} is gpusight itself, one of its parents or init; {name} not sent")
    if create_time is None:
        raise SignalRefused(f"PID {pid}: start time unknown, cannot check it is the same process; {name} not sent")
    try:
        process = psutil.Process(pid)
        started = process.create_time()
        owner = process.uids().real
        label = safe_text(process.name(), 40)
    except psutil.NoSuchProcess:
        raise SignalRefused(f"PID {pid} no longer exists; {name} not sent") from None
    except psutil.AccessDenied:
        raise SignalRefused(f"PID {pid}: access denied reading the process; {name} not sent") from None
    if abs(started - create_time) > CREATE_TIME_TOLERANCE:
        raise SignalRefused(f"PID {pid} reused by another process ({label}); not signalled")
    me = os.getuid()
    if me != 0 and owner != me:
        raise SignalRefused(
            f"PID {pid} belongs to another user (uid {owner}); only root may signal it; {name} not sent"
        )
    try:
        process.send_signal(sig)
    except psutil.NoSuchProcess:
        raise SignalRefused(f"PID {pid} exited before {name} could be sent") from None
    except psutil.AccessDenied:
        raise SignalRefused(f"PID {pid}: permission denied sending {name}") from None
    return f"Sent {name} to PID {pid} ({label})"
