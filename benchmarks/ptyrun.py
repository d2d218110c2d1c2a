"""Run a monitor in a real pseudo-terminal of a given size and measure what it costs.

Measured after a warm-up: CPU milliseconds per second of the whole process tree, bytes per second
written to the terminal, the longest pause between two writes, and the peak resident memory of the
tree over the whole run. The first full frame is the end of the first burst of output that contains
a marker only sampled data can produce (the last GPU's power limit), measured from the spawn.
"""

from __future__ import annotations

import itertools
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.terminal import PtyTerminal

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


def tree_cpu(root: psutil.Process) -> float:
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


def first_frame_end(chunks: list[tuple[float, int]], output: bytes, marker: re.Pattern[bytes]) -> float | None:
    """Monotonic time at which the first output burst holding a match of ``marker`` ended; None if never seen.

    A burst is a run of reads less than ``BURST_GAP_S`` apart.
    """
    found = marker.search(output)
    if found is None:
        return None
    received = 0
    for index, (at, size) in enumerate(chunks):
        received += size
        if received >= found.end():
            end = at
            for later, _ in chunks[index + 1 :]:
                if later - end > BURST_GAP_S:
                    break
                end = later
            return end
    return None


def run_in_pty(
    argv: Sequence[str],
    env: dict[str, str],
    columns: int,
    rows: int,
    warmup_s: float,
    measure_s: float,
    marker: re.Pattern[bytes],
) -> PtyResult:
    """Run ``argv`` in a ``columns`` x ``rows`` pty for ``warmup_s + measure_s`` seconds and measure it."""
    terminal = PtyTerminal(argv, (columns, rows), env=env, controlling=True, log_chunks=True)
    root = psutil.Process(terminal.proc.pid)
    warm_at = terminal.started + warmup_s
    end_at = warm_at + measure_s
    peak_rss = 0
    cpu_at_warm: float | None = None
    try:
        while (now := time.monotonic()) < end_at and terminal.proc.poll() is None:
            peak_rss = max(peak_rss, _tree_rss(root))
            if cpu_at_warm is None and now >= warm_at:
                cpu_at_warm = tree_cpu(root)
                warm_at = now
            time.sleep(min(SAMPLE_PERIOD_S, max(0.0, end_at - now)))
        cpu_end = tree_cpu(root)
        elapsed = time.monotonic() - warm_at
        peak_rss = max(peak_rss, _tree_rss(root))
        status = terminal.quit(grace=QUIT_GRACE_S)
    finally:
        terminal.cleanup()
    measured = [(at, size) for at, size in terminal.chunks if at >= warm_at]
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(measured)]
    first = first_frame_end(terminal.chunks, bytes(terminal.output), marker)
    cpu_used = cpu_end - (cpu_at_warm if cpu_at_warm is not None else cpu_end)
    return PtyResult(
        cpu_ms_per_s=1000.0 * cpu_used / elapsed if elapsed > 0 else 0.0,
        bytes_per_s=sum(size for _, size in measured) / elapsed if elapsed > 0 else 0.0,
        peak_rss_bytes=peak_rss,
        first_frame_s=None if first is None else first - terminal.started,
        max_write_gap_s=max(gaps) if gaps else None,
        exit_status=status,
    )
