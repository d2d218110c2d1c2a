"""Run a monitor in a real pseudo-terminal of a given size and measure what it costs.

Measured after a warm-up: CPU milliseconds per second of the whole process tree, bytes per second
written to the terminal, the longest pause between two writes, and the peak resident memory of the
tree over the whole run. The first full frame is the end of the first burst of output that contains
a marker only sampled data can produce (the last GPU's utilization), measured from the spawn.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Sequence
from dataclasses import dataclass

import psutil

BURST_GAP_S = 0.05
"""Output pauses shorter than this belong to the same frame."""

SAMPLE_PERIOD_S = 0.1
"""How often the process tree's CPU and memory are read."""

QUIT_GRACE_S = 5.0
"""How long a monitor gets to quit after ``q`` before it is terminated."""


@dataclass(frozen=True)
class PtyResult:
    """What one monitor run cost."""

    cpu_ms_per_s: float
    """CPU time (user + system) of the process tree per wall second, in milliseconds, after the warm-up."""
    bytes_per_s: float
    """Bytes written to the terminal per wall second after the warm-up."""
    peak_rss_bytes: int
    """Largest resident memory of the whole tree seen during the run."""
    first_frame_s: float | None
    """Seconds from spawn to the end of the first output burst holding the marker; None if never seen."""
    max_write_gap_s: float | None
    """Longest time between two terminal writes after the warm-up; None with fewer than two writes."""
    exit_status: int | None
    """Exit status after ``q`` (negative: killed by that signal); None if it had to be killed."""


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _tree_cpu(root: psutil.Process) -> float:
    """CPU seconds of ``root``, its live descendants and its reaped children."""
    total = 0.0
    for index, proc in enumerate(_tree(root)):
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
        if index == 0:
            total += times.children_user + times.children_system
    return total


def _tree_rss(root: psutil.Process) -> int:
    total = 0
    for proc in _tree(root):
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total


def _spawn_in_pty(argv: Sequence[str], env: dict[str, str], columns: int, rows: int) -> tuple[subprocess.Popen, int]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

    def become_terminal_owner() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        list(argv), stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True,
        preexec_fn=become_terminal_owner,  # noqa: PLW1509 - the benchmark starts no threads of its own
    )
    os.close(slave)
    return proc, master


def _read_available(master: int, timeout: float) -> bytes | None:
    """Bytes waiting on the terminal within ``timeout``; b"" if none; None once the terminal closed."""
    ready, _, _ = select.select([master], [], [], max(0.0, timeout))
    if not ready:
        return b""
    try:
        return os.read(master, 65536)
    except OSError:
        return None


def _stop(proc: subprocess.Popen, master: int) -> int | None:
    """Ask the monitor to quit with ``q``; terminate, then kill it if it does not."""
    try:
        os.write(master, b"q")
    except OSError:
        pass
    deadline = time.monotonic() + QUIT_GRACE_S
    while proc.poll() is None and time.monotonic() < deadline:
        if _read_available(master, 0.05) is None:
            break
    try:
        return proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=2)
            break
        except subprocess.TimeoutExpired:
            continue
    return None


def run_in_pty(
    argv: Sequence[str],
    env: dict[str, str],
    columns: int,
    rows: int,
    warmup_s: float,
    measure_s: float,
    marker: bytes,
) -> PtyResult:
    """Run ``argv`` in a ``columns`` x ``rows`` pty for ``warmup_s + measure_s`` seconds and measure it."""
    proc, master = _spawn_in_pty(argv, env, columns, rows)
    root = psutil.Process(proc.pid)
    spawned = time.monotonic()
    warm_at = spawned + warmup_s
    end_at = warm_at + measure_s
    peak_rss = 0
    cpu_at_warm: float | None = None
    measured_bytes = 0
    last_write: float | None = None
    max_gap: float | None = None
    tail = b""
    marker_seen = False
    first_frame: float | None = None
    next_sample = spawned
    try:
        while True:
            now = time.monotonic()
            if now >= end_at:
                break
            if now >= next_sample:
                peak_rss = max(peak_rss, _tree_rss(root))
                next_sample = now + SAMPLE_PERIOD_S
            if cpu_at_warm is None and now >= warm_at:
                cpu_at_warm = _tree_cpu(root)
                warm_at = now
            chunk = _read_available(master, min(next_sample, end_at) - now)
            if chunk is None:
                break
            now = time.monotonic()
            if not chunk:
                if marker_seen and first_frame is None and last_write is not None and now - last_write > BURST_GAP_S:
                    first_frame = last_write - spawned
                continue
            if marker_seen and first_frame is None and last_write is not None and now - last_write > BURST_GAP_S:
                first_frame = last_write - spawned
            if not marker_seen:
                tail += chunk
                marker_seen = marker in tail
                tail = tail[-len(marker):]
            if cpu_at_warm is not None:
                measured_bytes += len(chunk)
                if last_write is not None and last_write >= warm_at:
                    max_gap = max(max_gap or 0.0, now - last_write)
            last_write = now
        cpu_end = _tree_cpu(root)
        elapsed = time.monotonic() - warm_at
        peak_rss = max(peak_rss, _tree_rss(root))
    finally:
        status = _stop(proc, master)
        os.close(master)
    cpu_used = cpu_end - (cpu_at_warm if cpu_at_warm is not None else cpu_end)
    return PtyResult(
        cpu_ms_per_s=1000.0 * cpu_used / elapsed if elapsed > 0 else 0.0,
        bytes_per_s=measured_bytes / elapsed if elapsed > 0 else 0.0,
        peak_rss_bytes=peak_rss,
        first_frame_s=first_frame,
        max_write_gap_s=max_gap,
        exit_status=status,
    )
