"""The compact recording format (the default for ``--record``); see ``docs/recording.md``.

CONTRACT PLACEHOLDER for the session: the helper writing the format replaces these bodies.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from gputop.collect.model import Snapshot
from gputop.collect.recording_format import AdviceEvent, RecordingProblem


class CompactWriter:
    """Appends snapshots to a compact recording (a :class:`gputop.collect.sampler.SnapshotWriter`)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        """Where the recording goes."""
        raise NotImplementedError("compact format: being written")

    def write(self, snapshot: Snapshot) -> None:
        """Store one snapshot (flushed to the OS within about a second; raises OSError on a write failure)."""
        raise NotImplementedError

    def close(self) -> None:
        """Flush everything and close the file; later writes raise."""
        raise NotImplementedError


def read_compact(file: BinaryIO) -> Iterator[Snapshot | RecordingProblem]:
    """Stream the snapshots of an open compact recording from its start, with a problem for each damaged block."""
    raise NotImplementedError


class CompactRecording:
    """A compact recording opened for random access (implements ``SeekableRecording``)."""

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
