"""Rolling statistics of a training loop's steps: input-wait share, steps, samples and tokens per second.

The training loop adds only to a few local sums per step; a few times a second it hands a *bucket*
(:class:`Bucket`: iteration time, wait time, steps, samples, tokens) to :class:`RollingWindow`, which keeps
the buckets of the last few seconds of iteration. Time outside iteration (validation, checkpointing between
epochs) belongs to no bucket, so it neither counts as waiting nor as stepping.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from gpusight.snapshot.model import BatchSizeSource, BreakdownSource, FlopsSource, MathMode


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Statistics over the recent window of iteration; None where not known (yet)."""

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
    samples_per_second: float | None = None
    """Samples per second of iteration time (known only when every step in the window had a sample count)."""
    tokens_per_second: float | None = None
    """Tokens (token ids, padding included) per second, where every step's batch held token ids."""
    batch_size_source: BatchSizeSource | None = None
    """How the samples per step are known."""
    flops_per_step: float | None = None
    """FLOPs of one training step."""
    flops_source: FlopsSource | None = None
    """Where ``flops_per_step`` comes from (counted: HFU; given or 6N: MFU)."""
    achieved_tflops: float | None = None
    """FLOPs per step times steps per second, in TFLOP/s."""
    peak_tflops: float | None = None
    """Peak dense TFLOP/s of the GPU for ``math_mode``, or as given."""
    peak_source: str | None = None
    """Where the peak comes from."""
    math_mode: MathMode | None = None
    """The arithmetic of the matrix multiplications."""
    flops_utilization_fraction: float | None = None
    """Achieved over peak FLOP/s: MFU, or HFU when the FLOPs were counted."""
    flops_utilization_note: str | None = None
    """Why the utilization is unknown."""
    breakdown: dict[str, float] | None = None
    """Step-time shares (0..1) by part (data, compute, communication, copy, idle), summing to 1."""
    breakdown_source: BreakdownSource | None = None
    """What the breakdown was measured from."""


@dataclass(frozen=True, slots=True)
class Bucket:
    """What a stretch of iteration adds to the window."""

    end: float
    """Monotonic time the stretch ended."""
    elapsed: float
    """Seconds of iteration it covers."""
    wait: float
    """Seconds of it spent waiting for batches."""
    steps: int
    """Steps measured in it."""
    samples: int = 0
    """Samples in those steps."""
    sample_steps: int = 0
    """Steps whose samples are known."""
    tokens: int = 0
    """Tokens in those steps."""
    token_steps: int = 0
    """Steps whose tokens are known."""
    skipped: int = 0
    """Steps made but left out of the figures (instrumented steps: their time is not the loop's own)."""


class RollingWindow:
    """Buckets ending within the last ``span`` seconds, with running sums over them."""

    def __init__(self, span: float) -> None:
        """Keep the buckets that ended within ``span`` seconds of the newest one."""
        if span <= 0:
            raise ValueError("span must be positive")
        self.span = span
        """Seconds of history kept."""
        self._buckets: deque[Bucket] = deque()
        self._sums = [0.0, 0.0, 0, 0, 0, 0, 0]
        self._total_steps = 0

    def add(self, end: float, elapsed: float, wait: float, steps: int) -> None:
        """Add a bucket of timing only that ended at monotonic time ``end``; drop buckets older than the span."""
        self.add_bucket(Bucket(end, elapsed, wait, steps))

    def add_bucket(self, bucket: Bucket) -> None:
        """Add ``bucket``; drop buckets older than the span."""
        self._buckets.append(bucket)
        self._change(bucket, 1)
        self._total_steps += bucket.steps + bucket.skipped
        while self._buckets[0].end < bucket.end - self.span:
            self._change(self._buckets.popleft(), -1)

    def _change(self, bucket: Bucket, sign: int) -> None:
        """Add (``sign`` 1) or remove (-1) ``bucket`` from the running sums."""
        values = (bucket.elapsed, bucket.wait, bucket.steps, bucket.samples, bucket.sample_steps, bucket.tokens,
                  bucket.token_steps)
        for index, value in enumerate(values):
            self._sums[index] += sign * value

    def stats(self) -> WindowStats:
        """The statistics over the buckets kept (running sums: constant time)."""
        elapsed_sum, wait_sum, steps, samples, sample_steps, tokens, token_steps = self._sums
        elapsed = max(0.0, elapsed_sum)
        wait = min(max(0.0, wait_sum), elapsed)
        steps = int(steps)
        rate = elapsed > 0.0 and steps > 0
        return WindowStats(
            window_seconds=elapsed,
            steps=steps,
            total_steps=self._total_steps,
            input_wait_fraction=wait / elapsed if rate else None,
            steps_per_second=steps / elapsed if rate else None,
            step_seconds=elapsed / steps if steps else None,
            wait_seconds=wait / steps if steps else None,
            samples_per_second=samples / elapsed if rate and sample_steps == steps else None,
            tokens_per_second=tokens / elapsed if rate and token_steps == steps else None,
        )
