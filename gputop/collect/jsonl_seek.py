"""Random access into JSON-lines recordings (plain or gzip): an index of line offsets built by one scan.

CONTRACT PLACEHOLDER for the session: the helper writing steerable replay replaces this body.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from gputop.collect.model import Snapshot
from gputop.collect.recording_format import AdviceEvent, RecordingProblem


class JsonlRecording:
    """A JSON-lines recording opened for random access (implements ``SeekableRecording``)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        """The file."""
        self.first_timestamp = 0.0
        """Timestamp of the first readable snapshot."""
        self.last_timestamp = 0.0
        """Timestamp of the last readable snapshot when opened."""
        raise NotImplementedError

    def read_from(self, timestamp: float | None = None) -> Iterator[Snapshot | RecordingProblem]:
        """See ``SeekableRecording.read_from``."""
        raise NotImplementedError

    def advice_events(self) -> Sequence[AdviceEvent]:
        """See ``SeekableRecording.advice_events``."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the file."""
        raise NotImplementedError
