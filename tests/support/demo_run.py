"""A recorded run made fast: demo scenarios one after another on a simulated clock, through the real sampler, advice
engine and recording writer, with an optional pause (the recording stopped and resumed) between two of them.

Each scenario brings its own GPUs and processes, so processes come and go between segments and advice is raised and
cleared as the workload changes; the simulated clock lets minutes of a run be written in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpusight.advice.engine import AdviceEngine
from gpusight.demo.source import DemoSource
from gpusight.recordings.opening import open_recorder
from gpusight.sampling.history import History
from gpusight.sampling.sampler import Sampler
from gpusight.snapshot.model import Snapshot, SourceKind


@dataclass(frozen=True)
class Segment:
    """One stretch of the run: a demo scenario for ``seconds``, then ``pause`` seconds with no snapshot."""

    scenario: str
    """Demo scenario name."""
    seconds: float
    """How long it runs (simulated)."""
    pause: float = 0.0
    """Seconds the recording stops after it."""


class SimulatedClock:
    """A clock that moves only when told."""

    def __init__(self, start: float) -> None:
        self.now = start
        """Current simulated epoch seconds."""

    def __call__(self) -> float:
        return self.now


class _Scenarios:
    """A snapshot source that polls the demo source of the current segment."""

    kind = SourceKind.DEMO

    def __init__(self, clock: SimulatedClock) -> None:
        self.clock = clock
        self.current: DemoSource | None = None

    def poll(self) -> Snapshot:
        assert self.current is not None
        return self.current.poll()

    def close(self) -> None:
        if self.current is not None:
            self.current.close()


def record_demo_run(path: Path, segments: list[Segment], interval: float = 1.0, start: float = 1_795_000_000.0,
                    history: History | None = None) -> int:
    """Write the run of ``segments`` to the recording ``path`` (format by its name); returns the snapshots written.

    ``history``, when given, is the sampler's history (to compare a session's summary with its recording's)."""
    clock = SimulatedClock(start)
    source = _Scenarios(clock)
    recorder = open_recorder(path)
    sampler = Sampler(source, interval, history if history is not None else History(), advisor=AdviceEngine(), recorder=recorder)
    written = 0
    try:
        for segment in segments:
            if source.current is not None:
                source.current.close()
            source.current = DemoSource(segment.scenario, clock=clock)
            for _ in range(int(segment.seconds / interval)):
                clock.now += interval
                sampler.poll_once()
                written += 1
            clock.now += segment.pause
    finally:
        recorder.close()
        source.close()
    return written
