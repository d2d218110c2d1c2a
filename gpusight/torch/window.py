"""Rolling statistics of a training loop's steps: input-wait share, steps per second, mean step and wait time.

The training loop adds only to two local sums per step; a few times a second it hands a *bucket*
(iteration time, wait time, steps) to :class:`RollingWindow`, which keeps the buckets of the last
few seconds of iteration. Time outside iteration (validation, checkpointing between epochs) belongs
to no bucket, so it neither counts as waiting nor as stepping.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Statistics over the recent window of iteration; None where no step was seen yet."""

    window_seconds: float
    """Seconds of iteration covered."""
    steps: int
    """Steps within the window."""
    total_steps: int
    """Steps since the start."""
    input_wait_fraction: float | None
    """Share (0..1) of the window's iteration time spent waiting for the next batch."""
    steps_per_second: float | None
    """Steps per second of iteration time."""
    step_seconds: float | None
    """Mean time from one batch to the next."""
    wait_seconds: float | None
    """Mean time spent waiting for a batch."""


class RollingWindow:
    """Buckets of (iteration seconds, wait seconds, steps) ending within the last ``span`` seconds."""

    def __init__(self, span: float) -> None:
        """Keep the buckets that ended within ``span`` seconds of the newest one."""
        if span <= 0:
            raise ValueError("span must be positive")
        self.span = span
        """Seconds of history kept."""
        self._buckets: deque[tuple[float, float, float, int]] = deque()
        self._elapsed = 0.0
        self._wait = 0.0
        self._steps = 0
        self._total_steps = 0

    def add(self, end: float, elapsed: float, wait: float, steps: int) -> None:
        """Add a bucket that ended at monotonic time ``end``; drop buckets older than the span."""
        self._buckets.append((end, elapsed, wait, steps))
        self._elapsed += elapsed
        self._wait += wait
        self._steps += steps
        self._total_steps += steps
        while self._buckets[0][0] < end - self.span:
            _, old_elapsed, old_wait, old_steps = self._buckets.popleft()
            self._elapsed -= old_elapsed
            self._wait -= old_wait
            self._steps -= old_steps

    def stats(self) -> WindowStats:
        """The statistics over the buckets kept (running sums: constant time)."""
        elapsed, steps = max(0.0, self._elapsed), self._steps
        wait = min(max(0.0, self._wait), elapsed)
        timed = elapsed > 0.0
        return WindowStats(
            window_seconds=elapsed,
            steps=steps,
            total_steps=self._total_steps,
            input_wait_fraction=wait / elapsed if timed and steps else None,
            steps_per_second=steps / elapsed if timed and steps else None,
            step_seconds=elapsed / steps if steps else None,
            wait_seconds=wait / steps if steps else None,
        )
