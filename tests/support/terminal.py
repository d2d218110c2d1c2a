"""One way to run a program on a real pseudo-terminal, shared by the tests and the benchmarks.

:class:`PtyTerminal` starts a command on the slave side of a fresh pty of a given size, in its own
session, and a thread drains the master side the way a terminal emulator would, so the program never
blocks on output. The test keeps its copy of the slave, so it can read the terminal modes after the
program is gone. :class:`PtyGpusight` is the same for ``python -m gpusight``.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

DEADLINE = 20.0
"""Seconds a step may take before it is called a hang (not a speed measurement)."""

ENTER_ALT_SCREEN = b"\x1b[?1049h"
"""Sequence that switches a terminal to the alternate screen."""

LEAVE_ALT_SCREEN = b"\x1b[?1049l"
"""Sequence that switches a terminal back from the alternate screen."""

SHOW_CURSOR = b"\x1b[?25h"
"""Sequence that makes the cursor visible again."""

QUIT_GRACE_S = 5.0
"""How long :meth:`PtyTerminal.quit` waits after the quit key before terminating the program."""


def set_size(fd: int, columns: int, rows: int) -> None:
    """Set a pty's window size."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def gpusight_argv(*args: str) -> list[str]:
    """The command line that runs this checkout's gpusight with ``args``."""
    return [sys.executable, "-m", "gpusight", *args]


class PtyTerminal:
    """``argv`` running on a ``columns`` x ``rows`` pseudo-terminal; everything it writes is collected.

    With ``stdout`` (a file, or ``subprocess.PIPE`` for the caller to read from ``proc.stdout``) only its
    stderr (and stdin) is the terminal.
    """

    def __init__(
        self,
        argv: Sequence[str],
        size: tuple[int, int],
        *,
        env: dict[str, str] | None = None,
        controlling: bool = False,
        stdin_tty: bool = True,
        cwd: str | Path | None = None,
        keep_output: bool = True,
        log_chunks: bool = False,
        stdout: int | IO[bytes] | None = None,
    ) -> None:
        self.master, self.slave = pty.openpty()
        """Our end of the terminal, and our copy of the program's end."""
        set_size(self.slave, *size)
        base = dict(os.environ, TERM="xterm-256color") if env is None else dict(env)
        base.setdefault("TERM", "xterm-256color")
        base.update(COLUMNS=str(size[0]), LINES=str(size[1]))
        # As the session leader that opened the pty as its controlling terminal, the program gets the
        # kernel's SIGHUP when the master closes; without it, only the terminal itself says it is gone.
        make_controlling = (lambda: fcntl.ioctl(1, termios.TIOCSCTTY, 0)) if controlling else None
        self.started = time.monotonic()
        """Monotonic time of the spawn."""
        self.proc = subprocess.Popen(
            list(argv),
            stdin=self.slave if stdin_tty else subprocess.DEVNULL,
            stdout=self.slave if stdout is None else stdout,
            stderr=self.slave,
            env=base,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=make_controlling,  # one ioctl in the child, no locks taken
        )
        self.output = bytearray()
        """Everything written so far (empty when ``keep_output`` is False)."""
        self.received = 0
        """Bytes written so far."""
        self.chunks: list[tuple[float, int]] = []
        """(monotonic time, byte count) of every read from the terminal, when ``log_chunks`` is set."""
        self.status: int | None = None
        """Exit status once reaped (negative: killed by that signal)."""
        self.rusage_cpu: float | None = None
        """User plus system CPU seconds of the program, once reaped by :meth:`reap`."""
        self._keep_output = keep_output
        self._log_chunks = log_chunks
        self._master_open = True
        self._slave_open = True
        self._reader = threading.Thread(target=self._drain, name="pty-reader", daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            if self._log_chunks:
                self.chunks.append((time.monotonic(), len(data)))
            if self._keep_output:
                self.output.extend(data)
            self.received += len(data)

    def send(self, keys: bytes | str) -> None:
        """Type ``keys`` into the terminal."""
        os.write(self.master, keys.encode() if isinstance(keys, str) else keys)

    def resize(self, columns: int, rows: int) -> None:
        """Change the window size and tell the program, as a terminal emulator does."""
        set_size(self.slave, columns, rows)
        try:
            os.killpg(self.proc.pid, signal.SIGWINCH)
        except ProcessLookupError:
            pass

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
        """Wait until ``condition`` holds; fail on a hang or if the program died first."""
        deadline = time.monotonic() + timeout
        while not condition():
            if self.proc.poll() is not None:
                raise AssertionError(f"the program exited ({self.proc.returncode}) before {what}: {self.text()[-2000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.05)

    def reap(self, timeout: float = DEADLINE) -> int:
        """Wait for the program to exit (failing on a hang); returns its exit status and keeps its CPU use."""
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError("the program did not exit")
            time.sleep(0.02)
        self.proc.returncode = self.status = os.waitstatus_to_exitcode(status)
        self.rusage_cpu = usage.ru_utime + usage.ru_stime
        self._reader.join(1.0)
        return self.status

    def quit(self, key: bytes = b"q", grace: float = QUIT_GRACE_S) -> int | None:
        """Press ``key`` and wait; terminate, then kill the program's group if it does not exit.

        Returns the exit status, or None when it had to be stopped by force.
        """
        try:
            self.send(key)
        except OSError:
            pass
        try:
            self.status = self.proc.wait(timeout=grace)
            return self.status
        except subprocess.TimeoutExpired:
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=2)
                break
            except subprocess.TimeoutExpired:
                continue
        return None

    def close_master(self) -> None:
        """Make the terminal disappear, as when the terminal emulator or the SSH link goes away."""
        if self._master_open:
            self._master_open = False
            os.close(self.master)

    def close_slave(self) -> None:
        """Close the test's copy of the program's end: its output then ends as soon as the program is gone, so
        :meth:`reap` does not wait for more (the terminal's modes and size can no longer be read or set)."""
        if self._slave_open:
            self._slave_open = False
            os.close(self.slave)

    def canonical(self) -> bool:
        """True when the terminal is in canonical mode with echo (as a shell expects it)."""
        lflag = termios.tcgetattr(self.slave)[3]
        return bool(lflag & termios.ICANON) and bool(lflag & termios.ECHO)

    def restored(self) -> bool:
        """The alternate screen was left and the cursor shown after it was last entered."""
        tail = bytes(self.output[max(0, self.output.rfind(ENTER_ALT_SCREEN)) :])
        return LEAVE_ALT_SCREEN in tail and SHOW_CURSOR in tail[tail.find(LEAVE_ALT_SCREEN) :]

    def text(self) -> str:
        """Everything written so far, decoded leniently."""
        return self.output.decode("utf-8", "replace")

    def cleanup(self) -> None:
        """Kill the program if it is still running and close both ends of the pty."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.close_master()
        self.close_slave()

    def __enter__(self) -> PtyTerminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


class PtyGpusight(PtyTerminal):
    """``gpusight --demo healthy`` (or ``gpusight *args``) on a pty of ``size`` (columns, rows)."""

    def __init__(
        self,
        size: tuple[int, int],
        *,
        controlling: bool,
        stdin_tty: bool = True,
        args: tuple[str, ...] = ("--demo", "healthy"),
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
    ) -> None:
        super().__init__(gpusight_argv(*args), size, env=env, controlling=controlling, stdin_tty=stdin_tty, cwd=cwd)

    def wait_up(self, marker: bytes = b"simulated") -> None:
        """Wait until the app has taken over the terminal and drawn a header holding ``marker``."""
        self.wait_for(lambda: ENTER_ALT_SCREEN in self.output and marker in self.output, "the first screen")
