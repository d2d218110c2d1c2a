"""The replay source: plays a recording back snapshot by snapshot (``gputop --replay FILE``).

The file is streamed, never loaded whole. Damaged lines become ``ErrorNote("replay", "line N: ...")``
notes that stay on every later snapshot (the first few, then a count), so a one-shot print or the
screen still shows them after playback moved on. Every snapshot is relabelled
``replay: <file> (recorded <date>, source <original source>)``.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import statistics
import time
from collections.abc import Generator
from pathlib import Path

from gputop.collect.model import ErrorNote, Snapshot, SourceKind
from gputop.collect.recording import RecordingProblem, read_recording

MAX_SHOWN_PROBLEMS = 5
"""Damaged lines listed one by one; beyond this they are only counted."""

INTERVAL_SAMPLE = 100
"""How many gaps between the first recorded snapshots are used to estimate the recorded pace."""


class ReplayError(Exception):
    """A recording that cannot be replayed at all; ``str()`` is a one-line message for the user."""


class ReplaySource:
    """Returns a recording's snapshots one per poll; at the end repeats the last one, or loops."""

    kind = SourceKind.REPLAY
    """Value of ``Snapshot.source`` for replayed data."""

    def __init__(self, path: str | os.PathLike[str], loop: bool = False) -> None:
        self.path = Path(path)
        """The recording."""
        self.loop = loop
        """Start again from the first snapshot after the last one."""
        self.finished = False
        """True once the last recorded snapshot has been returned (never set when looping)."""
        self._notes: list[ErrorNote] = []
        self._seen_problems: set[str] = set()
        self._reader = self._open()
        first = self._read_snapshot()
        if first is None:
            self._reader.close()
            raise ReplayError(self._nothing_readable())
        self._ahead: Snapshot | None = first
        self._last = first
        self._first_timestamp = first.timestamp
        self._offset = 0.0
        self._date = time.strftime("%Y-%m-%d %H:%M", time.localtime(first.timestamp))
        self.recorded_interval: float | None = self._measure_interval()
        """Median gap between the first recorded timestamps, in seconds; None with fewer than two snapshots."""

    def _open(self) -> Generator[Snapshot | RecordingProblem, None, None]:
        try:
            return read_recording(self.path)
        except OSError as exc:
            raise ReplayError(f"cannot read recording {self.path}: {exc.strerror or exc}") from exc

    def _nothing_readable(self) -> str:
        if not self._notes:
            return f"recording {self.path} is empty"
        return f"recording {self.path} has no readable snapshots ({self._notes[0].message})"

    def _read_snapshot(self) -> Snapshot | None:
        """The next snapshot from the file, noting the problems met on the way; None at the end."""
        for item in self._reader:
            if isinstance(item, RecordingProblem):
                self._note(str(item))
            else:
                return item
        return None

    def _note(self, message: str) -> None:
        """Remember a problem once (a looping replay meets the same damaged lines again)."""
        if message not in self._seen_problems:
            self._seen_problems.add(message)
            self._notes.append(ErrorNote("replay", message))

    def _standing_notes(self) -> tuple[ErrorNote, ...]:
        shown = tuple(self._notes[:MAX_SHOWN_PROBLEMS])
        hidden = len(self._notes) - len(shown)
        if hidden > 0:
            shown += (ErrorNote("replay", f"{hidden} more damaged lines skipped"),)
        return shown

    def _measure_interval(self) -> float | None:
        timestamps = []
        reader = read_recording(self.path)
        try:
            for item in reader:
                if isinstance(item, Snapshot):
                    timestamps.append(item.timestamp)
                    if len(timestamps) > INTERVAL_SAMPLE:
                        break
        finally:
            reader.close()
        gaps = [b - a for a, b in itertools.pairwise(timestamps) if b > a]
        return statistics.median(gaps) if gaps else None

    def poll(self) -> Snapshot:
        """The next recorded snapshot, relabelled, with the problems met so far as errors."""
        if self._ahead is None and self.loop:
            self._restart()
        if self._ahead is None:
            self.finished = True
            return self._relabel(self._last)
        snapshot = self._ahead
        self._last = snapshot
        self._ahead = self._read_snapshot()
        if self._ahead is None and not self.loop:
            self.finished = True
        return self._relabel(snapshot)

    def _restart(self) -> None:
        """Reopen the file for another pass, shifting timestamps so time keeps moving forward."""
        self._reader.close()
        try:
            self._reader = read_recording(self.path)
        except OSError as exc:
            self._note(f"cannot reopen {self.path.name} to loop: {exc.strerror or exc}")
            self.loop = False
            return
        self._offset += (self._last.timestamp - self._first_timestamp) + (self.recorded_interval or 1.0)
        self._ahead = self._read_snapshot()

    def _relabel(self, snapshot: Snapshot) -> Snapshot:
        notes = self._standing_notes()
        return dataclasses.replace(
            snapshot,
            timestamp=snapshot.timestamp + self._offset,
            source=self.kind,
            label=f"replay: {self.path.name} (recorded {self._date}, source {snapshot.source})",
            errors=snapshot.errors + notes,
        )

    def close(self) -> None:
        """Close the recording."""
        self._reader.close()
