"""Host CPU busy and iowait percentages between two polls, from one read of the CPU counters.

The deltas are kept by this object rather than in psutil's module-wide state, so several users
of psutil in one process, or a poller created on one thread and used on another, cannot disturb
each other's readings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psutil

_GUEST_FIELDS = ("guest", "guest_nice")
"""Linux counts guest time inside user and nice too; leave it out of the total as psutil does."""


def _total(times: Any) -> float:
    """All CPU time in one ``cpu_times`` record, without double-counted guest time."""
    total = float(sum(times))
    for name in _GUEST_FIELDS:
        total -= float(getattr(times, name, 0.0))
    return total


def _idle(times: Any) -> float:
    """Idle time including time waiting for I/O, as psutil's ``cpu_percent`` counts it."""
    return float(times.idle) + float(getattr(times, "iowait", 0.0))


def _percent(part: float, whole: float) -> float:
    """``part`` as a percent of ``whole`` to 0.1 (as psutil's ``cpu_percent``: the counters tick in 10 ms), clamped
    to 0..100 (counters can step backwards)."""
    return min(100.0, max(0.0, round(part / whole * 100.0, 1)))


class CpuMeter:
    """Per-core busy percent and overall iowait percent since the previous reading."""

    def __init__(self) -> None:
        """Take the baseline reading, so that the first ``read`` covers the time since now."""
        self._last: Sequence[Any] = psutil.cpu_times(percpu=True)
        self._result: tuple[tuple[float, ...], float | None] = ((), None)

    def read(self) -> tuple[tuple[float, ...], float | None]:
        """Return ``(busy percent per core, iowait percent or None)`` since the previous call.

        When no clock tick has passed since then, the previous result is returned again; ``()``
        and None until a first interval has been measured or after the core count changed.
        """
        now = psutil.cpu_times(percpu=True)
        before, self._last = self._last, now
        if len(before) != len(now):
            self._result = ((), None)
            return self._result
        totals = [_total(b) - _total(a) for a, b in zip(before, now, strict=True)]
        whole = sum(totals)
        if whole <= 0:
            self._last = before
            return self._result
        per_core = tuple(
            _percent(total - (_idle(b) - _idle(a)), total) if total > 0 else 0.0
            for a, b, total in zip(before, now, totals, strict=True)
        )
        iowait = None
        if hasattr(now[0], "iowait"):
            waited = sum(b.iowait - a.iowait for a, b in zip(before, now, strict=True))
            iowait = _percent(waited, whole)
        self._result = (per_core, iowait)
        return self._result
