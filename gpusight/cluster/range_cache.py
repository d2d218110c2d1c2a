"""Range-query answers kept between polls, so that each poll fetches only the newest steps of a chart.

The poll's time grid is aligned to multiples of the step, so the points of two polls fall on the same
instants. Each poll asks again for the last ``overlap`` seconds (a sample scraped late may change the newest
points), merges the answer into what it holds and forgets the points older than the grid's start.
"""

from __future__ import annotations

import math

from gpusight.cluster.answer import NodeCut
from gpusight.cluster.prom import PrometheusClient, Series

OVERLAP_SECONDS = 10.0
"""How far back each poll fetches again, at least three steps."""


class RangeCache:
    """One range query's series over a sliding window, updated incrementally."""

    def __init__(self, expr: str, step: float) -> None:
        self.expr = expr
        """The PromQL expression."""
        self.step = step
        """Seconds between points."""
        self._labels: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        self._points: dict[tuple[tuple[str, str], ...], dict[float, float]] = {}
        self._newest: float | None = None

    def fetch(self, client: PrometheusClient, start: float, end: float, cut: NodeCut | None = None) -> list[Series]:
        """The series from ``start`` (a multiple of the step) to ``end``, asking the server only for what is new
        (and keeping what ``cut`` keeps)."""
        first = start
        if self._newest is not None and self._newest >= start:
            overlap = max(OVERLAP_SECONDS, 3 * self.step)
            first = start + max(0, math.ceil((self._newest - overlap - start) / self.step)) * self.step
        answer = client.query_range(self.expr, first, end, self.step, cut)
        for series in answer:
            key = tuple(sorted(series.labels.items()))
            points = self._points.get(key)
            if points is None:
                self._labels[key] = series.labels
                points = self._points[key] = {}
            for t, v in series.points:
                points[t] = v
            newest = series.points[-1][0]
            self._newest = newest if self._newest is None else max(self._newest, newest)
        del answer  # its points now live in the cache: a large answer is not held twice
        for key in list(self._points):
            points = self._points[key]
            for t in [t for t in points if t < start]:
                del points[t]
            if not points:
                del self._points[key], self._labels[key]
        return [Series(self._labels[key], tuple(sorted(points.items()))) for key, points in self._points.items()]
