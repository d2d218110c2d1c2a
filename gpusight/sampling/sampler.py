"""The sampler: one thread that polls a source at a fixed cadence, without overlap, and fans snapshots out."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Protocol

from gpusight.sampling.filters import Filters
from gpusight.sampling.frame import Frame
from gpusight.sampling.history import History
from gpusight.sampling.source import SnapshotSource
from gpusight.sampling.speed_history import SpeedHistory
from gpusight.sampling.steering import Command, LeadIn, PlaybackState, SteerableSource
from gpusight.sampling.timegrid import ChartView, TimeGrid
from gpusight.snapshot.model import Advice, ErrorNote, Snapshot

MIN_INTERVAL = 0.1
"""Shortest polling period allowed, in seconds."""

DEFAULT_INTERVAL = 0.5
"""Polling period used when none is given, in seconds."""

STOP_WAIT_S = 0.1
"""Longest time ``Sampler.stop`` waits for a poll in progress (a quit must not wait on a hung driver)."""

Advisor = Callable[[Snapshot, History], tuple[Advice, ...]]
"""Turns the newest snapshot plus history into advice (the advice engine)."""

Subscriber = Callable[[Frame], None]
"""Receives each finished frame, on the sampler thread; must return quickly."""


class SnapshotWriter(Protocol):
    """Anything that stores snapshots, such as a recording (``write`` may raise OSError)."""

    def write(self, snapshot: Snapshot) -> None:
        """Store one snapshot."""
        ...

    def close(self) -> None:
        """Flush and release the storage."""
        ...


class Sampler:
    """Polls ``source`` every ``interval`` seconds on its own thread.

    Polls never overlap: when a poll overruns the period, the next one starts right after it and
    missed ticks are dropped rather than queued. Each snapshot gets advice (when an advisor is
    given; a replay of a recording that carries advice keeps the recorded advice instead), goes
    into ``history`` and the chart ``grid``, into the recorder (when given), and then, seen
    through ``filters`` (whose user filter is a view), as an immutable :class:`Frame` with the
    grid's view, to ``latest_frame`` and every subscriber.
    """

    def __init__(
        self,
        source: SnapshotSource,
        interval: float = DEFAULT_INTERVAL,
        history: History | None = None,
        advisor: Advisor | None = None,
        recorder: SnapshotWriter | None = None,
        filters: Filters | None = None,
        grid: TimeGrid | None = None,
        speeds: SpeedHistory | None = None,
    ) -> None:
        self.source = source
        """Where snapshots come from."""
        self.history = history if history is not None else History()
        """Ring-buffer history of everything polled."""
        self.grid = grid if grid is not None else TimeGrid()
        """Chart history on a time grid, written by the polling thread only."""
        self.speeds = speeds if speeds is not None else SpeedHistory(
            self.grid.column_seconds, self.grid.zoom_factors, self.grid.capacities)
        """The processes' speed on a time grid of the same periods and sizes, written by the polling thread only."""
        self.latest_frame: Frame | None = None
        """The newest frame handed out (None before the first poll); immutable, safe from any thread."""
        self.advisor = advisor
        """Advice engine, or None."""
        self.recorder = recorder
        """Recording sink, or None; dropped (with an error note) if a write fails."""
        self.max_gap = 0.0
        """Longest time seen between the starts of two consecutive polls, in seconds."""
        self.last_poll_seconds = 0.0
        """How long the latest poll took, advice and recording included."""
        self.poll_count = 0
        """How many polls have been taken since the sampler was made."""
        self._interval = clamp_interval(interval)
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._first_shown = threading.Event()
        self._wake = threading.Event()
        self._poll_now = False
        self._last_appended: float | None = None
        self._paused = False
        self._thread: threading.Thread | None = None
        self._last_start: float | None = None
        self._standing_errors: list[ErrorNote] = []
        self._filters = filters if filters is not None else Filters()
        self._view_lock = threading.Lock()
        self._unfiltered: tuple[Snapshot, tuple[ChartView, ChartView], PlaybackState | None] | None = None

    @property
    def interval(self) -> float:
        """Polling period in seconds."""
        return self._interval

    def set_interval(self, seconds: float) -> float:
        """Change the polling period (clamped to at least MIN_INTERVAL); returns the value applied."""
        self._interval = clamp_interval(seconds)
        self._wake.set()
        return self._interval

    @property
    def paused(self) -> bool:
        """True while polling is suspended."""
        return self._paused

    def pause(self) -> None:
        """Suspend polling (the last snapshot stays current)."""
        self._paused = True

    def resume(self) -> None:
        """Resume polling at once."""
        self._paused = False
        self._wake.set()

    def poll_soon(self) -> None:
        """Take the next poll at once, even while paused (a replay seek must not wait a whole interval).

        The cadence carries on from that poll's planned time.
        """
        self._poll_now = True
        self._wake.set()

    @property
    def steerable(self) -> bool:
        """True when the source plays a recording, which :meth:`steer` can pause, speed up and seek in."""
        return isinstance(self.source, SteerableSource) and self.source.playback_state() is not None

    def steer(self, command: Command) -> None:
        """Hand ``command`` to a steerable source and poll at once, so the screen answers now; nothing otherwise."""
        if isinstance(self.source, SteerableSource):
            self.source.steer(command)
            self.poll_soon()

    def prepare_steering(self) -> None:
        """Have a steerable source get ready for seeks in the background (a replay indexes its recording)."""
        if isinstance(self.source, SteerableSource):
            self.source.start_indexing()

    @property
    def source_finished(self) -> bool:
        """True once a steerable source has played its last snapshot; always False for live and demo data."""
        return isinstance(self.source, SteerableSource) and self.source.finished

    def subscribe(self, callback: Subscriber) -> None:
        """Call ``callback(frame)`` after every poll, on the sampler thread."""
        with self._lock:
            self._subscribers.append(callback)

    @property
    def filters(self) -> Filters:
        """The filters in force; their view part is applied to every snapshot handed out."""
        return self._filters

    def set_filters(self, filters: Filters) -> Frame | None:
        """Change the filters and hand the newest frame, seen through them, to every subscriber at once.

        Returns that frame (None before the first poll). History, charts and advice are unaffected.
        """
        with self._view_lock:
            self._filters = filters
            if self._unfiltered is None:
                return None
            snapshot, charts, playback = self._unfiltered
            return self._show(snapshot, charts, notify=True, playback=playback)

    def add_standing_error(self, note: ErrorNote) -> None:
        """Attach ``note`` to every snapshot from now on (e.g. a config warning, a failed recording)."""
        self._standing_errors.append(note)

    def poll_once(self) -> Snapshot:
        """Take one snapshot now on the calling thread, with advice, history, recording and filters applied."""
        return self._poll(notify=False).snapshot

    def _poll(self, notify: bool) -> Frame:
        started = time.monotonic()
        if self._last_start is not None:
            self.max_gap = max(self.max_gap, started - self._last_start)
        self._last_start = started
        self.poll_count += 1
        snapshot = self._poll_source()
        steerable = self.source if isinstance(self.source, SteerableSource) else None
        playback = steerable.playback_state() if steerable is not None else None
        recorded = playback is not None and playback.advice_recorded  # shown as it was recorded, not re-derived
        advisor = None if recorded else self.advisor
        lead_in = steerable.take_lead_in() if steerable is not None else None
        if lead_in is not None:
            self._take_in(lead_in, advisor)
        if snapshot.timestamp == self._last_appended:  # a paused or ended replay shows the same snapshot again
            charts, speeds = self.grid.view, self.speeds.view
        else:
            self._last_appended = snapshot.timestamp
            self.history.append(snapshot)
            charts, speeds = self.grid.append(snapshot), self.speeds.append(snapshot)
        if advisor is not None:
            snapshot = dataclasses.replace(snapshot, advice=advisor(snapshot, self.history))
        if advisor is not None or recorded:
            self.history.record_advice(snapshot.advice)
        self._record(snapshot)
        if self._standing_errors:
            snapshot = dataclasses.replace(snapshot, errors=snapshot.errors + tuple(self._standing_errors))
        self.last_poll_seconds = time.monotonic() - started
        with self._view_lock:  # so a set_filters never hands out its view before an older one
            return self._show(snapshot, (charts, speeds), notify, playback)

    def _take_in(self, lead_in: LeadIn, advisor: Advisor | None) -> None:
        """Put a replay's lead-in into the history, charts and ``advisor``'s state; after a seek, into fresh ones."""
        if lead_in.reset:
            self.history.clear()
            self.grid.reset()
            self.speeds.reset()
            self._last_appended = None
        for snapshot in lead_in.snapshots:
            self._last_appended = snapshot.timestamp
            self.history.append(snapshot)
            self.grid.append(snapshot)
            self.speeds.append(snapshot)
            if advisor is not None:  # advice holds and clears as if the passed-over time had been shown
                advisor(snapshot, self.history)

    def _show(
        self, snapshot: Snapshot, charts: tuple[ChartView, ChartView], notify: bool, playback: PlaybackState | None = None
    ) -> Frame:
        """Make ``snapshot`` the newest one, filtered, with the (GPU, process speed) ``charts``; called with the view
        lock held."""
        self._unfiltered = (snapshot, charts, playback)
        frame = Frame(self._filters.apply(snapshot), charts[0], playback, charts[1])
        self.latest_frame = frame
        self._first_shown.set()
        if notify and not self._stop.is_set():  # a poll that ends after stop() is not handed to a closing UI
            self._notify(frame)
        return frame

    def _notify(self, frame: Frame) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            callback(frame)

    def _poll_source(self) -> Snapshot:
        try:
            return self.source.poll()
        except Exception as exc:  # a source bug must not kill the monitor
            message = f"internal error in the {self.source.kind} source: {type(exc).__name__}: {exc}"
            return Snapshot(timestamp=time.time(), source=self.source.kind, errors=(ErrorNote("sampler", message),))

    def _record(self, snapshot: Snapshot) -> None:
        if self.recorder is None:
            return
        try:
            self.recorder.write(snapshot)
        except OSError as exc:
            self.recorder = None
            self.add_standing_error(ErrorNote("record", f"recording stopped: {exc}"))

    def wait_for_first(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until a snapshot has been taken; True when there is one."""
        return self._first_shown.wait(timeout)

    def start(self) -> None:
        """Start the polling thread (a daemon, so a lost terminal never hangs the exit)."""
        with self._lock:
            if self._thread is not None or self._stop.is_set():
                return
            self._last_start = None  # cadence is measured between the thread's polls, not from earlier manual ones
            self._thread = threading.Thread(target=self._run, name="gpusight-sampler", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = STOP_WAIT_S) -> None:
        """Stop polling and release the recorder and the source once no poll is running; later calls do nothing.

        Waits at most ``timeout`` seconds for a poll in progress. The polling thread releases the
        recorder and the source itself when it leaves its loop, so a poll stuck in a driver call
        (NVML can block for seconds) neither delays the caller nor has the source closed under it;
        if the process exits first, they are never closed (the recorder has flushed every line).
        Without a thread, they are released here.
        """
        with self._lock:
            if self._stop.is_set():
                return
            self._stop.set()
            thread = self._thread
        self._wake.set()
        if thread is None:
            self._release()
        elif thread is not threading.current_thread():
            thread.join(timeout)

    def _release(self) -> None:
        """Close the recorder and the source (on the polling thread once it started, else on the caller's)."""
        if self.recorder is not None:
            try:
                self.recorder.close()
            except OSError:
                pass
            self.recorder = None
        self.source.close()

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            self._release()

    def _loop(self) -> None:
        deadline = time.monotonic()
        while not self._stop.is_set():
            if self._paused and not self._poll_now:
                self._wake.wait()
                self._wake.clear()
                deadline = time.monotonic()
                continue
            self._poll_now = False
            self._poll(notify=True)
            if self._stop.is_set():
                return
            now = time.monotonic()
            deadline = max(deadline + self._interval, now)
            self._wake.clear()
            # A stop or a poll_soon between the poll and the clear must not wait a whole period.
            if not self._stop.is_set() and not self._poll_now:
                self._wake.wait(deadline - now)


def clamp_interval(seconds: float) -> float:
    """Return ``seconds`` raised to MIN_INTERVAL if below it."""
    return max(MIN_INTERVAL, float(seconds))
