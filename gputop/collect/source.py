"""The interface every snapshot source (live NVML+host, demo, replay) implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from gputop.collect.model import Snapshot, SourceKind
from gputop.collect.playback import LeadIn, PlaybackState


class SnapshotSource(Protocol):
    """Something the sampler can poll for whole snapshots."""

    kind: SourceKind
    """The value of ``Snapshot.source``."""

    def poll(self) -> Snapshot:
        """Take one snapshot. Must not raise for expected faults: report them in ``errors``."""
        ...

    def close(self) -> None:
        """Release handles, threads and files."""
        ...


@runtime_checkable
class SteerableSource(Protocol):
    """A source whose position can move (a replay): it tells the sampler where it stands and what it passed over."""

    def take_lead_in(self) -> LeadIn | None:
        """Snapshots the latest poll passed over or seeked past, to put into the history before its own; once."""
        ...

    def playback_state(self) -> PlaybackState | None:
        """Where playback stands after the latest poll; None when the source does not play a recording."""
        ...
