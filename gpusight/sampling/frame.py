"""What the sampler hands out after each poll: one immutable frame for every widget to draw from."""

from __future__ import annotations

from dataclasses import dataclass

from gpusight.sampling.steering import PlaybackState
from gpusight.sampling.timegrid import ChartView
from gpusight.snapshot.model import Snapshot


@dataclass(frozen=True, slots=True, eq=False)
class Frame:
    """The newest snapshot (seen through the filters) and the chart histories as of that poll."""

    snapshot: Snapshot
    """Devices, processes, host, advice and errors of the poll."""
    charts: ChartView
    """Chart columns of every zoom level, including the ones this poll changed or appended."""
    playback: PlaybackState | None = None
    """Where a replay stands (drawn by the position bar); None for live and demo data."""
    speeds: ChartView | None = None
    """The speed of the processes that report it, on a time grid keyed by pid (see
    :mod:`~gpusight.sampling.speed_history`); None where no sampler keeps it."""
