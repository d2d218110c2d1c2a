"""Each training process's speed over time, on the same time grid as the GPU charts: the process detail screen's history.

Only GPU processes that report speed (``gpusight.torch`` or a trainer's status record) are kept, at most
:data:`MAX_PROCESSES` per poll (the lowest pids), each row keyed by pid. A column keeps, per process, the lowest
steps, samples and tokens per second and MFU/HFU of the polls within its period (a slowdown is the event worth
seeing) and the largest share of each step-time part (a one-poll stall is not lost; the chart draws the parts as
shares of their sum). Memory is bounded by the grid's columns times :data:`MAX_PROCESSES`, however many processes
come and go (a column of a coarse zoom level that saw more keeps those polled last).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpusight.facts.speed import BREAKDOWN_FIELDS
from gpusight.sampling.timegrid import (
    DEFAULT_COLUMN_SECONDS,
    LEVEL_COLUMNS,
    ZOOM_FACTORS,
    ChartView,
    GridMetrics,
    TimeGrid,
)
from gpusight.snapshot.model import ProcessRole, ProcessSample, Snapshot

RATE_METRICS: tuple[str, ...] = (
    "steps_per_second",
    "samples_per_second",
    "tokens_per_second",
    "flops_utilization_percent",
)
"""Throughput and MFU/HFU fields kept; a column keeps the lowest poll of each."""

MAX_PROCESSES = 32
"""Most processes kept per poll (the lowest pids) and per column, so a machine with many short-lived trainers
stays bounded."""

SPEED_METRICS = GridMetrics(
    RATE_METRICS + tuple(name for name, _ in BREAKDOWN_FIELDS),
    frozenset(RATE_METRICS),
    MAX_PROCESSES,
)
"""What the speed grid keeps per process: the rates, then the step-time parts in stacking order."""


def charted(process: ProcessSample) -> bool:
    """True for a GPU process that reports any figure the speed grid keeps (a rate, MFU/HFU or a step-time part)."""
    return process.role == ProcessRole.GPU and any(
        getattr(process, name) is not None for name in SPEED_METRICS.names
    )


class SpeedHistory:
    """The writer side (the sampler's thread): folds each snapshot's reporting processes into a time grid."""

    def __init__(
        self,
        column_seconds: float = DEFAULT_COLUMN_SECONDS,
        zoom_factors: Sequence[int] = ZOOM_FACTORS,
        capacities: Sequence[int] = LEVEL_COLUMNS,
    ) -> None:
        self._grid = TimeGrid(column_seconds, zoom_factors, capacities, SPEED_METRICS)
        self._any = False

    @property
    def view(self) -> ChartView:
        """The newest view, keyed by pid (empty before the first snapshot)."""
        return self._grid.view

    def reset(self) -> ChartView:
        """Forget every column (a replay jumped to another time); returns the empty view."""
        self._any = False
        return self._grid.reset()

    def append(self, snapshot: Snapshot) -> ChartView:
        """Fold ``snapshot``'s reporting processes (one row per pid) into the grid; return the new view."""
        rows: dict[int, ProcessSample] = {}
        for process in snapshot.processes:
            if process.pid not in rows and charted(process):
                rows[process.pid] = process
        pids = tuple(sorted(rows)[:MAX_PROCESSES])
        if not pids and not self._any:
            return self._grid.view  # nothing has reported yet: no columns of nothing to fill
        self._any = True
        values = [
            math.nan if (value := getattr(rows[pid], name)) is None else float(value)
            for pid in pids
            for name in SPEED_METRICS.names
        ]
        return self._grid.add_rows(snapshot.timestamp, pids, values)
