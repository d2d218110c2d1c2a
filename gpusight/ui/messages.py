"""Messages from the sampler thread to the UI."""

from __future__ import annotations

from textual.message import Message

from gpusight.sampling.frame import Frame


class FrameReady(Message):
    """A new frame is available; a newer one replaces a stale one still waiting in the queue."""

    def __init__(self, frame: Frame) -> None:
        super().__init__()
        self.frame = frame
        """The frame to show."""

    def can_replace(self, message: Message) -> bool:
        """True when ``message`` is an older frame, so only the newest is applied."""
        return isinstance(message, FrameReady)


class TerminalLost(Message):
    """The controlling terminal hung up or stdin reached end of file: the app should exit."""
