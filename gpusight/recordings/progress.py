"""How far a read of a whole recording has got, told to a display that lives elsewhere (the command line's bar).

The readers that go through a whole file (:func:`gpusight.recordings.opening.read_recording` and the index
scans of :func:`gpusight.recordings.opening.open_seekable`) take an optional :class:`ReadProgress`. They tell
it the file's size when the read starts, the bytes of the file read so far after each piece they read (a
chunk of a compact recording, a megabyte of JSON lines) and when the read is over, however it ended
(:func:`gpusight.recordings.files.reading` does the first and the last). Nothing here draws: the data side
knows no terminal. The readers import this module only for type checking, so it costs their start-up nothing.
"""

from __future__ import annotations

from typing import Protocol


class ReadProgress(Protocol):
    """Told how far a read of a whole recording has got, maybe on another thread than the one that handed it over
    (a replay indexes its recording on a thread of its own)."""

    def begin(self, total: int) -> None:
        """A read starts: the file holds ``total`` bytes (a file still being written may grow past it)."""

    def reached(self, position: int) -> None:
        """The first ``position`` bytes of the file have been read; called for every piece read, so it must be cheap."""

    def end(self) -> None:
        """The read is over: finished, failed or abandoned."""

