"""A demo sampler whose history is filled and whose clock then stops: the same picture on every run.

Used for screenshots and screen snapshot tests: after the prefill every poll repeats the last
simulated snapshot, so nothing depends on the machine or the wall clock.
"""

from __future__ import annotations

from gpusight.advice.config import Thresholds
from gpusight.advice.engine import AdviceEngine
from gpusight.demo.source import DemoSource, prefill_seconds
from gpusight.sampling.history import History
from gpusight.sampling.sampler import Sampler

FROZEN_START = 1_700_000_000.0
"""Simulated epoch time where the history starts."""

PREFILL_STEP = 0.5
"""Simulated seconds between two prefill snapshots."""


class FrozenClock:
    """Steps by ``step`` seconds per call while ``running``; then stands still."""

    def __init__(self, start: float = FROZEN_START, step: float = PREFILL_STEP) -> None:
        self.now = start
        """The time the next call returns, less one step while running."""
        self.step = step
        """Seconds added per call while running."""
        self.running = True
        """False once the clock has stopped."""

    def __call__(self) -> float:
        if self.running:
            self.now += self.step
        return self.now


def frozen_demo_sampler(scenario: str, interval: float = PREFILL_STEP) -> Sampler:
    """A sampler over ``scenario`` with its prefill of history and advice (two minutes for most), its clock stopped."""
    clock = FrozenClock()
    sampler = Sampler(
        DemoSource(scenario, seed=0, clock=clock), interval=interval, history=History(600),
        advisor=AdviceEngine(Thresholds()),
    )
    for _ in range(round(prefill_seconds(scenario) / PREFILL_STEP)):
        sampler.poll_once()
    clock.running = False
    return sampler
