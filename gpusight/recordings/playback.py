"""The replay's playback: its speeds, how far back a seek reads, and where the next advice event lies."""

from __future__ import annotations

from gpusight.sampling.steering import AdviceEvent

SPEEDS: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100)
"""Playback speeds, slowest first: recorded snapshots played per poll (x1 is the recorded pace)."""

LEAD_IN_SECONDS = 180.0
"""Recorded time put into the history before the position after a seek: a full chart at 1 s per column."""


def step_speed(speed: int, steps: int) -> int:
    """The speed ``steps`` steps along :data:`SPEEDS` from ``speed`` (clamped to the ends)."""
    index = SPEEDS.index(speed) if speed in SPEEDS else 0
    return SPEEDS[max(0, min(len(SPEEDS) - 1, index + steps))]


def event_after(events: tuple[AdviceEvent, ...], position: float, forward: bool) -> float | None:
    """Timestamp of the first event after ``position`` (or the last before it); None when there is none."""
    if forward:
        return next((event.timestamp for event in events if event.timestamp > position), None)
    return next((event.timestamp for event in reversed(events) if event.timestamp < position), None)
