"""Terminal faults against the real ``gputop`` TUI in a pseudo-terminal: hangup, SIGTERM, stdin at EOF,
a terminal that disappears, a resize storm and a 20x5 terminal.

Each test starts ``python -m gputop --demo healthy`` on the slave side of a pty (the test keeps a
copy of the slave, so it can read the terminal modes after gputop is gone) and drains the master
side the way a terminal emulator would. "Restored" means what a user sees afterwards: the line
discipline is back in canonical mode with echo, and the last things written were leaving the
alternate screen and showing the cursor. Deadlines below only catch hangs; they are not speed
measurements.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import random
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator

import psutil
import pytest

from gputop.collect.demo import DemoSource
from gputop.collect.history import History
from gputop.collect.sampler import Sampler
from gputop.ui.app import GputopApp
from gputop.ui.messages import SnapshotReady

DEADLINE = 20.0
"""Seconds a step may take before the test calls it a hang."""

LEAVE_ALT_SCREEN = b"\x1b[?1049l"
"""Sequence that switches a terminal back from the alternate screen."""

SHOW_CURSOR = b"\x1b[?25h"
"""Sequence that makes the cursor visible again."""

ENTER_ALT_SCREEN = b"\x1b[?1049h"
"""Sequence that switches a terminal to the alternate screen."""

LOST_TERMINAL_CPU_SECONDS = 0.75
"""Most CPU time gputop may use between losing its terminal and exiting (a spin would use ~1 s per second)."""

IDLE_CPU_FRACTION = 0.5
"""Most CPU (fraction of one core) gputop may use while idling after a resize storm at a 0.5 s interval."""


def set_size(fd: int, columns: int, rows: int) -> None:
    """Set a pty's window size."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def cpu_seconds(process: psutil.Process) -> float:
    """User plus system CPU time used so far."""
    times = process.cpu_times()
    return times.user + times.system


class PtyGputop:
    """``gputop --demo healthy`` (or ``gputop *args``) running on a pty; ``output`` collects everything it writes."""

    def __init__(
        self, size: tuple[int, int], *, controlling: bool, stdin_tty: bool = True, args: tuple[str, ...] = ("--demo", "healthy")
    ) -> None:
        self.master, self.slave = pty.openpty()
        set_size(self.slave, *size)
        env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(size[0]), LINES=str(size[1]))
        # As the session leader that opened the pty as its controlling terminal, gputop gets the kernel's
        # SIGHUP when the master closes; without it, only the terminal itself says it is gone.
        make_controlling = (lambda: fcntl.ioctl(1, termios.TIOCSCTTY, 0)) if controlling else None
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gputop", *args],
            stdin=self.slave if stdin_tty else subprocess.DEVNULL,
            stdout=self.slave,
            stderr=self.slave,
            env=env,
            start_new_session=True,
            preexec_fn=make_controlling,  # noqa: PLW1509 - one ioctl, no locks taken
        )
        self.output = bytearray()
        self.status: int | None = None
        self.rusage_cpu: float | None = None
        self._master_open = True
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.output.extend(data)

    def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        """Wait until ``condition`` holds; fail on a hang or if gputop died first."""
        deadline = time.monotonic() + DEADLINE
        while not condition():
            if self.proc.poll() is not None:
                raise AssertionError(f"gputop exited ({self.proc.returncode}) before {what}: {self.text()[-2000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.05)

    def wait_up(self) -> None:
        """Wait until the app has taken over the terminal and drawn its header."""
        self.wait_for(lambda: ENTER_ALT_SCREEN in self.output and b"simulated" in self.output, "the demo screen")

    def reap(self) -> int:
        """Wait for gputop to exit (failing on a hang); returns its exit status and keeps its CPU use."""
        deadline = time.monotonic() + DEADLINE
        while True:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError("gputop did not exit")
            time.sleep(0.02)
        self.proc.returncode = self.status = os.waitstatus_to_exitcode(status)
        self.rusage_cpu = usage.ru_utime + usage.ru_stime
        self._reader.join(1.0)
        return self.status

    def close_master(self) -> None:
        """Make the terminal disappear, as when the terminal emulator or the SSH link goes away."""
        if self._master_open:
            self._master_open = False
            os.close(self.master)

    def canonical(self) -> bool:
        """True when the terminal is in canonical mode with echo (as a shell expects it)."""
        lflag = termios.tcgetattr(self.slave)[3]
        return bool(lflag & termios.ICANON) and bool(lflag & termios.ECHO)

    def restored(self) -> bool:
        """The alternate screen was left and the cursor shown after it was last entered."""
        tail = bytes(self.output[max(0, self.output.rfind(ENTER_ALT_SCREEN)):])
        return LEAVE_ALT_SCREEN in tail and SHOW_CURSOR in tail[tail.find(LEAVE_ALT_SCREEN):]

    def text(self) -> str:
        """Everything written so far, decoded leniently."""
        return self.output.decode("utf-8", "replace")

    def cleanup(self) -> None:
        """Kill gputop if it is still running and close both ends of the pty."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.close_master()
        os.close(self.slave)


@pytest.fixture
def start_gputop() -> Iterator[Callable[..., PtyGputop]]:
    """Factory starting gputop on a pty; everything is cleaned up after the test."""
    started: list[PtyGputop] = []

    def start(size: tuple[int, int] = (100, 30), *, controlling: bool = True, stdin_tty: bool = True) -> PtyGputop:
        app = PtyGputop(size, controlling=controlling, stdin_tty=stdin_tty)
        started.append(app)
        return app

    yield start
    for app in started:
        app.cleanup()


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGHUP, 129), (signal.SIGTERM, 143)])
def test_hangup_and_terminate_exit_cleanly_and_restore_the_terminal(start_gputop, sig, status):
    app = start_gputop()
    app.wait_up()
    assert not app.canonical()  # the app really had the terminal in raw mode

    app.proc.send_signal(sig)

    assert app.reap() == status
    assert app.canonical()
    assert app.restored()
    assert "Traceback" not in app.text()


@pytest.mark.parametrize("controlling", [True, False], ids=["with-sighup", "without-sighup"])
def test_a_vanished_terminal_ends_gputop_without_spinning(start_gputop, controlling):
    app = start_gputop(controlling=controlling)
    app.wait_up()
    before = cpu_seconds(psutil.Process(app.proc.pid))

    app.close_master()

    assert app.reap() == 129
    assert app.rusage_cpu is not None
    assert app.rusage_cpu - before < LOST_TERMINAL_CPU_SECONDS


def test_stdin_at_end_of_file_ends_gputop_and_restores_the_screen(start_gputop):
    app = start_gputop(stdin_tty=False)

    assert app.reap() == 129
    assert app.restored() or ENTER_ALT_SCREEN not in app.output
    assert app.canonical()
    assert "Traceback" not in app.text()


def test_a_resize_storm_leaves_gputop_responsive_and_idle(start_gputop):
    app = start_gputop()
    app.wait_up()
    rng = random.Random(7)
    sizes = [(20, 5), (1, 1), (300, 100), (80, 24), (43, 11), (160, 45), (200, 2)]
    for _ in range(300):
        set_size(app.slave, *rng.choice(sizes))  # the kernel sends SIGWINCH to gputop for each change
        time.sleep(0.002)
    set_size(app.slave, 100, 30)
    time.sleep(1.0)  # let the last resize's full redraw through; after that only changed cells are sent
    settled = len(app.output)
    os.write(app.master, b"?")
    app.wait_for(lambda: b"gputop keys" in app.output[settled:], "the help screen after the storm")
    os.write(app.master, b"\x1b")
    time.sleep(0.5)
    process = psutil.Process(app.proc.pid)
    start_cpu, start_wall = cpu_seconds(process), time.monotonic()
    time.sleep(2.0)
    used = (cpu_seconds(process) - start_cpu) / (time.monotonic() - start_wall)

    os.write(app.master, b"q")

    assert app.reap() == 0
    assert used < IDLE_CPU_FRACTION
    assert app.canonical() and app.restored()
    assert "Traceback" not in app.text()


def test_a_20x5_terminal_runs_and_quits(start_gputop):
    app = start_gputop(size=(20, 5))
    app.wait_for(lambda: ENTER_ALT_SCREEN in app.output and len(app.output) > 2000, "the first screen")
    drawn = len(app.output)
    app.wait_for(lambda: len(app.output) > drawn, "a later update")

    os.write(app.master, b"q")

    assert app.reap() == 0
    assert app.canonical() and app.restored()
    assert "Traceback" not in app.text()


def test_a_20x5_screen_keeps_every_line_inside_the_terminal():
    clock = iter(range(1_700_000_000, 1_800_000_000))
    sampler = Sampler(DemoSource("mixed", seed=1, clock=lambda: float(next(clock))), interval=3600.0,
                      history=History(100))
    for _ in range(10):
        sampler.poll_once()
    app = GputopApp(sampler)
    lines: list[str] = []

    async def main() -> None:
        async with app.run_test(size=(20, 5)) as pilot:
            for _ in range(5):
                app.post_message(SnapshotReady(sampler.poll_once()))
                await pilot.pause()
            await pilot.resize_terminal(20, 5)
            await pilot.pause()
            lines.extend(strip.text for strip in app.screen._compositor.render_strips())

    asyncio.run(main())

    assert 0 < len(lines) <= 5
    assert all(len(line) <= 20 for line in lines)
    assert app.snapshots_applied >= 5
