"""Steering a source whose position can move (a replay), through the sampler.

The UI hands :data:`Command` values to the sampler (``Sampler.steer``), which passes them to its
source; a :class:`SteerableSource` applies them at its next poll, on the polling thread, so playback
state is only ever changed on one thread. Each poll it tells the sampler where it stands
(:class:`PlaybackState`, carried by every frame to the position bar) and, after passing over recorded
time or seeking, hands over a :class:`LeadIn`: the snapshots before the new position, which the sampler
puts into its history and chart grid (fresh ones after a seek) so the charts are full at once and never
mix times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gpusight.snapshot.model import Severity, Snapshot


@dataclass(frozen=True, slots=True)
class AdviceEvent:
    """A piece of advice raised or cleared at one moment of a recording."""

    timestamp: float
    """The snapshot (epoch seconds) where the advice first appeared, or first was gone."""
    advice_id: str
    """``Advice.id``, e.g. ``"input_bound:gpu0"``."""
    severity: Severity
    """Its severity when raised (for a clearing, the severity it had)."""
    title: str
    """Its title when raised (for a clearing, the title it had)."""
    raised: bool
    """True when it appeared, False when it cleared."""


@dataclass(frozen=True, slots=True)
class TogglePause:
    """Pause playback, or resume it."""


@dataclass(frozen=True, slots=True)
class ChangeSpeed:
    """Step the speed along the replay's speeds: +1 faster, -1 slower (stops at the ends)."""

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
    """Recorded snapshots played per poll (x1 is the recorded pace)."""
    paused: bool
    """True while playback stands still."""
    loop: bool
    """True when playback starts again after the end."""
    events: tuple[AdviceEvent, ...]
    """Every advice event of the recording (one shared tuple), for the bar's ticks; empty until indexed."""
    indexing: bool = False
    """True while the recording is being indexed: seeks wait for it."""
    advice_recorded: bool = False
    """True when the recording carries the advice shown while it was made: that advice is shown, as recorded, and the
    rules are not run again; False when it carries none, so the advice is re-evaluated from the replayed data."""


@dataclass(frozen=True, slots=True)
class LeadIn:
    """Snapshots to put into the history before the poll's own snapshot."""

    reset: bool
    """True after a seek: forget the history and charts first (they belong to another time)."""
    snapshots: tuple[Snapshot, ...]
    """Oldest first; all older than the poll's snapshot."""


@runtime_checkable
class SteerableSource(Protocol):
    """A source whose position can move (a replay): it takes commands and tells the sampler where it stands."""

    def steer(self, command: Command) -> None:
        """Queue ``command`` (any thread); it takes effect at the next poll."""
        ...

    def start_indexing(self) -> None:
        """Get ready for seeks in the background (a replay indexes its recording); once, on any thread."""
        ...

    @property
    def finished(self) -> bool:
        """True once the last recorded snapshot has been played (never while looping)."""
        ...

    def take_lead_in(self) -> LeadIn | None:
        """Snapshots the latest poll passed over or seeked past, to put into the history before its own; once."""
        ...

    def playback_state(self) -> PlaybackState | None:
        """Where playback stands after the latest poll; None when the source does not play a recording."""
        ...
