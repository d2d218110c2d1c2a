"""Messages from the sampler thread to the UI."""

from __future__ import annotations

from textual.message import Message

from gputop.collect.model import Snapshot


class SnapshotReady(Message):
    """A new snapshot is available; a newer one replaces a stale one still waiting in the queue."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot
        """The snapshot to show."""

    def can_replace(self, message: Message) -> bool:
        """True when ``message`` is a newer snapshot, so only the newest is applied."""
        return isinstance(message, SnapshotReady)


class TerminalLost(Message):
    """The controlling terminal hung up or stdin reached end of file: the app should exit."""
