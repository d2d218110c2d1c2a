"""Prefilling a live demo: simulated time before now, so its charts and advice are full from the first frame."""

from __future__ import annotations

import time

from gpusight.demo.source import prefill_seconds
from gpusight.sampling.sampler import Sampler


class DemoClock:
    """Wall clock shifted into the past while a demo's history is prefilled."""

    def __init__(self) -> None:
        self.offset = 0.0
        """Seconds subtracted from the wall clock."""

    def __call__(self) -> float:
        return time.time() - self.offset


def prefill_demo(sampler: Sampler, clock: DemoClock, scenario: str) -> None:
    """Run the demo through its scenario's prefill of simulated time (on ``clock``) so charts and advice start full.

    Nothing of the prefill is recorded: the sampler's recorder is set aside meanwhile.
    """
    steps = int(prefill_seconds(scenario) / sampler.interval)
    recorder, sampler.recorder = sampler.recorder, None
    for step in range(steps, 0, -1):
        clock.offset = step * sampler.interval
        sampler.poll_once()
    clock.offset = 0.0
    sampler.recorder = recorder
    sampler.max_gap = 0.0
