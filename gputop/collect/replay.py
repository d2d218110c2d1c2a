"""The replay source: plays a recording back snapshot by snapshot (``gputop --replay FILE``).

The file is streamed, never loaded whole, and read once: the snapshots read ahead to measure the
recorded pace are the ones played first. Damaged lines become ``ErrorNote("replay", "line N: ...")``
notes that stay on every later snapshot: the first few one by one, the rest only counted, so a file
of millions of damaged lines costs no more memory than one with a few. Every snapshot is relabelled
``replay: <file> (recorded <date>, source <original source>)``.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import statistics
import time
from collections import deque
from collections.abc import Generator
from pathlib import Path

from gputop.collect.model import ErrorNote, Snapshot, SourceKind
from gputop.collect.recording import read_recording
from gputop.collect.recording_format import RecordingProblem

MAX_SHOWN_PROBLEMS = 5
"""Damaged lines listed one by one; beyond this they are only counted."""

INTERVAL_SAMPLE = 100
"""How many gaps between the first recorded snapshots are used to estimate the recorded pace."""

READ_AHEAD_PROBLEMS = 1000
"""Damaged parts the read-ahead for the pace may pass; beyond them playback starts with what was found."""


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
        self._shown: list[ErrorNote] = []
        self._skipped = 0
        self._counted_through = 0  # line of the last damage counted: a looping replay meets the same lines again
        self._reader = self._open()
        first = self._read_snapshot()
        if first is None:
            self._reader.close()
            raise ReplayError(self._nothing_readable())
        self._ahead: deque[tuple[Snapshot, list[RecordingProblem]]] = deque([(first, [])])
        """Snapshots read but not played yet, each with the damage met after it (noted when it is played)."""
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
        if not self._shown:
            return f"recording {self.path} is empty"
        count = len(self._shown) + self._skipped
        return f"recording {self.path} has no readable snapshots ({self._shown[0].message}; {count} damaged in all)"

    def _read_snapshot(self) -> Snapshot | None:
        """The next snapshot from the file, noting the problems met on the way; None at the end."""
        for item in self._reader:
            if isinstance(item, RecordingProblem):
                self._note(item)
            else:
                return item
        return None

    def _note(self, problem: RecordingProblem) -> None:
        """Show the first few problems, count the rest; each damaged line once, however often a loop meets it."""
        if problem.line <= self._counted_through:
            return
        self._counted_through = problem.line
        if len(self._shown) < MAX_SHOWN_PROBLEMS:
            self._shown.append(ErrorNote("replay", str(problem)))
        else:
            self._skipped += 1

    def _standing_notes(self) -> tuple[ErrorNote, ...]:
        if not self._skipped:
            return tuple(self._shown)
        return (*self._shown, ErrorNote("replay", f"{self._skipped} more damaged lines skipped"))

    def _measure_interval(self) -> float | None:
        """Read up to ``INTERVAL_SAMPLE`` more snapshots ahead (kept for playback) and return their median gap.

        The read-ahead stops early after ``READ_AHEAD_PROBLEMS`` damaged parts, so damage never makes
        the first snapshot wait for the rest of the file.
        """
        problems = 0
        for item in self._reader:
            if isinstance(item, RecordingProblem):
                self._ahead[-1][1].append(item)
                problems += 1
                if problems >= READ_AHEAD_PROBLEMS:
                    break
            else:
                self._ahead.append((item, []))
                if len(self._ahead) > INTERVAL_SAMPLE:
                    break
        timestamps = [snapshot.timestamp for snapshot, _ in self._ahead]
        gaps = [b - a for a, b in itertools.pairwise(timestamps) if b > a]
        return statistics.median(gaps) if gaps else None

    def poll(self) -> Snapshot:
        """The next recorded snapshot, relabelled, with the problems met so far as errors."""
        if not self._ahead and self.loop:
            self._restart()
        if not self._ahead:
            self.finished = True
            return self._relabel(self._last)
        snapshot, damage_after = self._ahead.popleft()
        self._last = snapshot
        for problem in damage_after:
            self._note(problem)
        if not self._ahead:
            following = self._read_snapshot()
            if following is not None:
                self._ahead.append((following, []))
            elif not self.loop:
                self.finished = True
        return self._relabel(snapshot)

    def _restart(self) -> None:
        """Reopen the file for another pass, shifting timestamps so time keeps moving forward."""
        self._reader.close()
        try:
            self._reader = read_recording(self.path)
        except OSError as exc:
            # Listed even beyond MAX_SHOWN_PROBLEMS: it happens once, as looping stops here.
            self._shown.append(ErrorNote("replay", f"cannot reopen {self.path.name} to loop: {exc.strerror or exc}"))
            self.loop = False
            return
        self._offset += (self._last.timestamp - self._first_timestamp) + (self.recorded_interval or 1.0)
        following = self._read_snapshot()
        if following is not None:
            self._ahead.append((following, []))

    def _relabel(self, snapshot: Snapshot) -> Snapshot:
        return dataclasses.replace(
            snapshot,
            timestamp=snapshot.timestamp + self._offset,
            source=self.kind,
            label=f"replay: {self.path.name} (recorded {self._date}, source {snapshot.source})",
            errors=snapshot.errors + self._standing_notes(),
        )

    def close(self) -> None:
        """Close the recording."""
        self._reader.close()
