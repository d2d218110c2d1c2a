"""Recordings written with the real sampler, advice engine and writer, on simulated time (fast, deterministic)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpusight.advice.engine import AdviceEngine
from gpusight.demo.source import DemoSource
from gpusight.recordings.opening import open_recorder
from gpusight.sampling.sampler import Sampler

DAY_START = 1_763_856_000.0
"""2025-11-23 00:00:00 UTC: where test recordings start unless told otherwise."""


def write_demo_recording(
    path: Path,
    seconds: float,
    *,
    start: float = DAY_START,
    interval: float = 1.0,
    scenarios: Sequence[str] = ("input-bound",),
    segment_s: float | None = None,
) -> Path:
    """Record ``seconds`` of demo data every ``interval`` seconds from ``start`` into ``path`` (format by name).

    With several ``scenarios``, the data switches to the next one every ``segment_s`` seconds (in turn),
    so advice is raised and cleared along the way. Returns ``path``.
    """
    now = [start]
    sources = [DemoSource(name, seed=1, clock=lambda: now[0]) for name in scenarios]
    recorder = open_recorder(path)
    sampler = Sampler(sources[0], interval, advisor=AdviceEngine(), recorder=recorder)
    steps = int(seconds / interval)
    for step in range(steps):
        now[0] = start + step * interval
        if segment_s is not None:
            sampler.source = sources[int(step * interval // segment_s) % len(sources)]
        sampler.poll_once()
    recorder.close()
    return path
