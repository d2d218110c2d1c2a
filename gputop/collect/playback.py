"""Steering a replay: the commands the UI sends, the playback state every frame carries, and the lead-in.

The UI thread queues :data:`Command` values on the replay source (``ReplaySource.steer``); the
sampler's thread applies them at its next poll, so playback state is only ever changed on one
thread. After a seek the source offers a :class:`LeadIn`: the recorded snapshots before the new
position, which the sampler puts into a fresh history and chart grid so the charts are full at once
and never mix times.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputop.collect.model import Snapshot
from gputop.collect.recording_format import AdviceEvent

SPEEDS: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100)
"""Playback speeds, slowest first: recorded snapshots played per poll (x1 is the recorded pace)."""

LEAD_IN_SECONDS = 180.0
"""Recorded time put into the history before the position after a seek: a full chart at 1 s per column."""


@dataclass(frozen=True, slots=True)
class TogglePause:
    """Pause playback, or resume it."""


@dataclass(frozen=True, slots=True)
class ChangeSpeed:
    """Step the speed along :data:`SPEEDS`: +1 faster, -1 slower (stops at the ends)."""

    steps: int
    """How many steps, signed."""


@dataclass(frozen=True, slots=True)
class SeekTo:
    """Jump to a recorded time (clamped to the recording)."""

    timestamp: float
    """Epoch seconds in the recording."""


@dataclass(frozen=True, slots=True)
class SeekBy:
    """Jump by some seconds of recorded time from the position when the command is applied."""

    seconds: float
    """Signed: negative goes back."""


@dataclass(frozen=True, slots=True)
class SeekEvent:
    """Jump to the next (or previous) advice raising or clearing."""

    forward: bool
    """True for the next event after the position, False for the last one before it."""


Command = TogglePause | ChangeSpeed | SeekTo | SeekBy | SeekEvent
"""Anything the UI can ask of a playing recording."""


@dataclass(frozen=True, slots=True, eq=False)
class PlaybackState:
    """Where a replay stands, as of one poll; what the position bar draws."""

    start: float
    """Timestamp of the recording's first snapshot."""
    end: float | None
    """Timestamp of its last snapshot (when indexed); None while the index is being built."""
    position: float
    """Recorded timestamp of the snapshot shown."""
    speed: int
    """One of :data:`SPEEDS`."""
    paused: bool
    """True while playback stands still."""
    loop: bool
    """True when playback starts again after the end."""
    events: tuple[AdviceEvent, ...]
    """Every advice event of the recording (one shared tuple), for the bar's ticks; empty until indexed."""
    indexing: bool = False
    """True while the recording is being indexed: seeks wait for it."""


@dataclass(frozen=True, slots=True)
class LeadIn:
    """Snapshots to put into the history before the poll's own snapshot."""

    reset: bool
    """True after a seek: forget the history and charts first (they belong to another time)."""
    snapshots: tuple[Snapshot, ...]
    """Oldest first; all older than the poll's snapshot."""


def step_speed(speed: int, steps: int) -> int:
    """The speed ``steps`` steps along :data:`SPEEDS` from ``speed`` (clamped to the ends)."""
    index = SPEEDS.index(speed) if speed in SPEEDS else 0
    return SPEEDS[max(0, min(len(SPEEDS) - 1, index + steps))]


def event_after(events: tuple[AdviceEvent, ...], position: float, forward: bool) -> float | None:
    """Timestamp of the first event after ``position`` (or the last before it); None when there is none."""
    if forward:
        return next((event.timestamp for event in events if event.timestamp > position), None)
    return next((event.timestamp for event in reversed(events) if event.timestamp < position), None)
