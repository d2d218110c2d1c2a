"""The replay source: plays a recording back snapshot by snapshot (``gpusight --replay FILE``), steerably.

The file is opened for random access (:func:`gpusight.recordings.opening.open_seekable`) and streamed
from the position, never loaded whole: the snapshots read ahead to measure the recorded pace are the
ones played first. Steering commands (:mod:`gpusight.sampling.steering`) are queued by any thread with
:meth:`ReplaySource.steer` and applied at the next poll, on the polling thread: at speed xN a poll
plays N recorded snapshots and returns the last (the others come as a lead-in for the history and
charts); a seek starts reading just before the target and hands the recorded time before it over as
a lead-in that replaces the history. Damaged lines become ``ErrorNote("replay", "line N: ...")``
notes that stay on every later snapshot: the first few one by one, the rest only counted, so a file
of millions of damaged lines costs no more memory than one with a few. Every snapshot is relabelled
``replay: <file> (recorded <date>, source <original source>, advice as recorded)``.

A recording carries the advice shown while it was made, and that advice is what a replay shows (as ``--report``
does), unless the recording carries none at all (made with ``--no-advice``, or by a tool that writes none): then
``advice_recorded`` stays False and the sampler re-evaluates the rules on the replayed data.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import statistics
import threading
import time
from collections import deque
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from gpusight.recordings.formats import RecordingProblem, SeekableRecording
from gpusight.recordings.opening import open_seekable, read_recording
from gpusight.recordings.playback import LEAD_IN_SECONDS, SPEEDS, event_after, step_speed
from gpusight.sampling.steering import (
    AdviceEvent,
    ChangeSpeed,
    Command,
    LeadIn,
    PlaybackState,
    SeekBy,
    SeekEvent,
    SeekTo,
    TogglePause,
)
from gpusight.snapshot.model import ErrorNote, Snapshot, SourceKind

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress

MAX_SHOWN_PROBLEMS = 5
"""Damaged lines listed one by one; beyond this they are only counted."""

INTERVAL_SAMPLE = 100
"""How many gaps between the first recorded snapshots are used to estimate the recorded pace."""

READ_AHEAD_PROBLEMS = 1000
"""Damaged parts the read-ahead for the pace may pass; beyond them playback starts with what was found."""


class ReplayError(Exception):
    """A recording that cannot be replayed at all; ``str()`` is a one-line message for the user."""


class ReplaySource:
    """Returns a recording's snapshots one per poll (more at higher speeds); at the end repeats the last one, or loops.

    Implements :class:`gpusight.sampling.steering.SteerableSource`.
    """

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
        self._reader: Iterator[Snapshot | RecordingProblem] = self._open()
        first = self._read_snapshot()
        if first is None:
            self._close_reader()
            raise ReplayError(self._nothing_readable())
        self._ahead: deque[tuple[Snapshot, list[RecordingProblem]]] = deque([(first, [])])
        """Snapshots read but not played yet, each with the damage met after it (noted when it is played)."""
        self._last = first
        self._offset = 0.0
        self._date = time.strftime("%Y-%m-%d %H:%M", time.localtime(first.timestamp))
        self.advice_recorded = False
        """True once any advice is known in the recording (read ahead, played or in its index); never reset."""
        self.recorded_interval: float | None = self._measure_interval()
        """Median gap between the first recorded timestamps, in seconds; None with fewer than two snapshots."""
        self.first_timestamp = first.timestamp
        """Recorded timestamp of the first readable snapshot."""
        self.last_timestamp: float | None = None
        """Recorded timestamp of the last snapshot, known once the recording is indexed (see ``start_indexing``)."""
        self.index_error: str | None = None
        """Why the recording cannot be indexed for seeking, once that is known; None otherwise."""
        self._recording: SeekableRecording | None = None
        self._events: tuple[AdviceEvent, ...] = ()
        self._indexed = threading.Event()
        self._index_lock = threading.Lock()
        self._index_thread: threading.Thread | None = None
        self._closed = False
        self._commands: list[Command] = []
        self._commands_lock = threading.Lock()
        self._speed = SPEEDS[0]
        self._paused = False
        self._target: float | None = None
        self._lead_in: LeadIn | None = None

    def _open(self) -> Generator[Snapshot | RecordingProblem, None, None]:
        try:
            return read_recording(self.path)
        except OSError as exc:
            raise ReplayError(f"cannot read recording {self.path}: {exc.strerror or exc}") from exc

    def start_indexing(self, progress: ReadProgress | None = None) -> None:
        """Open the recording for seeking on a background thread (once); seeks wait until it is ready.

        Playing needs no index, so ``--once`` and ``--check`` never build one. A compact recording opens
        at once; a JSON-lines one is scanned whole (on 2 cores about 0.5 s per GB of plain text, 16 s per GB
        of ``.jsonl.gz``). When it fails, seeks are dropped and ``index_error`` is shown on every snapshot.
        ``progress`` is told how far the scan has got, from the indexing thread (only by the call that starts it).
        """
        with self._index_lock:
            if self._index_thread is not None or self._closed:
                return
            self._index_thread = threading.Thread(target=self._build_index, args=(progress,), name="gpusight-replay-index",
                                                  daemon=True)
            self._index_thread.start()

    def wait_indexed(self, timeout: float | None = None, progress: ReadProgress | None = None) -> bool:
        """Start indexing if needed (see ``start_indexing``) and wait up to ``timeout`` seconds for it; True when it
        finished (or failed)."""
        self.start_indexing(progress)
        return self._indexed.wait(timeout)

    def _build_index(self, progress: ReadProgress | None) -> None:
        recording: SeekableRecording | None = None
        try:
            recording = open_seekable(self.path, progress)
        except Exception as exc:  # any failure only disables seeking, and is shown
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
            self.index_error = f"cannot seek in {self.path.name}: {reason}"
        with self._index_lock:
            if recording is not None and self._closed:
                recording.close()
            elif recording is not None:
                self._events = tuple(recording.advice_events())
                self.advice_recorded = self.advice_recorded or bool(self._events)
                last = recording.last_timestamp
                self.last_timestamp = last if math.isfinite(last) else self.first_timestamp
                self._recording = recording
        self._indexed.set()

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
        notes = list(self._shown)
        if self._skipped:
            notes.append(ErrorNote("replay", f"{self._skipped} more damaged lines skipped"))
        if self.index_error is not None:
            notes.append(ErrorNote("replay", self.index_error))
        return tuple(notes)

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
        self.advice_recorded = any(snapshot.advice for snapshot, _ in self._ahead)
        timestamps = [snapshot.timestamp for snapshot, _ in self._ahead]
        gaps = [b - a for a, b in itertools.pairwise(timestamps) if b > a]
        return statistics.median(gaps) if gaps else None

    def steer(self, command: Command) -> None:
        """Queue ``command``; any thread may call this. It takes effect at the next poll (a seek once indexed)."""
        self.start_indexing()
        with self._commands_lock:
            self._commands.append(command)

    def playback_state(self) -> PlaybackState:
        """Where playback stands after the latest poll (read it on the polling thread)."""
        return PlaybackState(
            start=self.first_timestamp, end=self.last_timestamp, position=self._last.timestamp, speed=self._speed,
            paused=self._paused, loop=self.loop, events=self._events, indexing=not self._indexed.is_set(),
            advice_recorded=self.advice_recorded,
        )

    def take_lead_in(self) -> LeadIn | None:
        """The snapshots the latest poll passed over or seeked past, once; None when there are none."""
        lead_in, self._lead_in = self._lead_in, None
        return lead_in

    def poll(self) -> Snapshot:
        """The next recorded snapshot, relabelled, with the problems met so far as errors.

        Queued commands are applied first; paused, the snapshot shown before comes again.
        """
        self._apply_commands()
        if self._target is not None:
            target, self._target = self._target, None
            return self._seek(target)
        if self._paused:
            return self._relabel(self._last)
        played = []
        for _ in range(self._speed):
            snapshot = self._advance()
            if snapshot is None:
                break
            played.append(snapshot)
        if not played:
            return self._relabel(self._last)
        if len(played) > 1:
            self._lead_in = LeadIn(reset=False, snapshots=tuple(played[:-1]))
        return played[-1]

    def _apply_commands(self) -> None:
        """Apply the queued commands in order; a seek is kept in ``_target`` for this poll.

        Until the index is ready, seeks stay queued; when it failed, they are dropped.
        """
        with self._commands_lock:
            commands, self._commands = self._commands, []
        indexed = self._indexed.is_set()
        waiting: list[Command] = []
        for command in commands:
            position = self._last.timestamp if self._target is None else self._target
            if isinstance(command, (SeekTo, SeekBy, SeekEvent)) and (not indexed or self._recording is None):
                if not indexed:
                    waiting.append(command)
            elif isinstance(command, TogglePause):
                self._paused = not self._paused
            elif isinstance(command, ChangeSpeed):
                self._speed = step_speed(self._speed, command.steps)
            elif isinstance(command, SeekTo):
                self._target = command.timestamp
            elif isinstance(command, SeekBy):
                self._target = position + command.seconds
            elif isinstance(command, SeekEvent):
                found = event_after(self._events, position, command.forward)
                if found is not None:
                    self._target = found
        if waiting:
            with self._commands_lock:
                self._commands[:0] = waiting

    def _seek(self, target: float) -> Snapshot:
        """Continue from the last snapshot at or before ``target`` (clamped to the recording); return it.

        Reading starts :data:`LEAD_IN_SECONDS` earlier: what lies between becomes the lead-in that
        replaces the history. Playback time restarts without the loop's shift.
        """
        recording = self._recording
        assert recording is not None and self.last_timestamp is not None  # seeks wait for the index
        target = min(max(target, self.first_timestamp), self.last_timestamp)
        self._close_reader()
        self._reader = recording.read_from(max(self.first_timestamp, target - LEAD_IN_SECONDS))
        self._ahead.clear()
        self._offset = 0.0
        self.finished = False
        passed: list[Snapshot] = []
        current: Snapshot | None = None
        while (snapshot := self._read_snapshot()) is not None:
            if current is not None and snapshot.timestamp > target:
                self._ahead.append((snapshot, []))
                break
            if current is not None:
                passed.append(current)
            current = snapshot
        if current is None:  # the file shrank or broke since it was opened: stay where we were
            current = self._last
        elif not self._ahead and not self.loop:
            self.finished = True
        self._last = current
        self._lead_in = LeadIn(reset=True, snapshots=tuple(self._relabel(snapshot) for snapshot in passed))
        return self._relabel(current)

    def _advance(self) -> Snapshot | None:
        """The next recorded snapshot, relabelled; None at the end (``finished`` then set) unless looping."""
        if not self._ahead and self.loop:
            self._restart()
        if not self._ahead:
            self.finished = True
            return None
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
        self._close_reader()
        try:
            self._reader = read_recording(self.path)
        except OSError as exc:
            # Listed even beyond MAX_SHOWN_PROBLEMS: it happens once, as looping stops here.
            self._shown.append(ErrorNote("replay", f"cannot reopen {self.path.name} to loop: {exc.strerror or exc}"))
            self.loop = False
            return
        self._offset += (self._last.timestamp - self.first_timestamp) + (self.recorded_interval or 1.0)
        following = self._read_snapshot()
        if following is not None:
            self._ahead.append((following, []))

    def _relabel(self, snapshot: Snapshot) -> Snapshot:
        self.advice_recorded = self.advice_recorded or bool(snapshot.advice)
        advice = "advice as recorded" if self.advice_recorded else "no advice recorded"
        return dataclasses.replace(
            snapshot,
            timestamp=snapshot.timestamp + self._offset,
            source=self.kind,
            label=f"replay: {self.path.name} (recorded {self._date}, source {snapshot.source}, {advice})",
            errors=snapshot.errors + self._standing_notes(),
        )

    def _close_reader(self) -> None:
        """Stop reading where the reader is (a generator closes its file)."""
        close = getattr(self._reader, "close", None)
        if close is not None:
            close()

    def close(self) -> None:
        """Close the recording (an index still being built is closed when it is done)."""
        self._close_reader()
        with self._index_lock:
            self._closed = True
            if self._recording is not None:
                self._recording.close()
