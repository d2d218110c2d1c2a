"""The cluster view's poller: calls ``poll`` on its own thread, one call at a time, never on the UI thread.

A poll of a Prometheus server can take seconds. The poller runs it on a daemon thread (so quitting never
waits for a hung server), starts the next one ``interval`` seconds after the previous one started, or
right after it when it took longer (never two at once), and hands each result to ``deliver`` as one
immutable :class:`PolledFrame`. :meth:`ClusterPoller.wake` polls again at once, e.g. when the user drills
into a host whose history the next poll must fetch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpusight.cluster.frame import ClusterFrame

Poll = Callable[[str | None], ClusterFrame]
"""Reads the cluster once; its argument is the host whose detail (history) to fetch, or None."""


@dataclass(frozen=True, slots=True)
class PolledFrame:
    """One poll's result with how it went."""

    frame: ClusterFrame
    """What the poll returned."""
    seconds: float
    """How long the call to ``poll`` took (wall clock)."""
    focus_host: str | None
    """The host the poll was asked to detail."""
    finished_at: float
    """``time.monotonic()`` when the poll returned."""


class ClusterPoller:
    """Polls ``poll`` every ``interval`` seconds on a daemon thread and passes each :class:`PolledFrame` to ``deliver``.

    ``deliver`` runs on the poller's thread: it must only hand the frame over (``App.post_message``).
    """

    def __init__(self, poll: Poll, url: str, interval: float, deliver: Callable[[PolledFrame], None]) -> None:
        self.poll = poll
        """The function reading the cluster."""
        self.url = url
        """The server's URL, named in the frame made when ``poll`` breaks its promise and raises."""
        self.interval = interval
        """Seconds from the start of one poll to the start of the next."""
        self.deliver = deliver
        """Receives each result on the poller's thread."""
        self.focus_host: str | None = None
        """The host whose detail the next poll fetches."""
        self.paused = False
        """While True, no poll starts."""
        self.polls = 0
        """Polls finished so far."""
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start polling (the first poll begins at once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gpusight-cluster-poll", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop after the poll under way, without waiting for it."""
        self._stop.set()
        self._wake.set()

    def wake(self) -> None:
        """Start the next poll now, or as soon as the one under way returns."""
        self._wake.set()

    def set_paused(self, paused: bool) -> None:
        """Pause or resume polling; resuming polls at once."""
        self.paused = paused
        if not paused:
            self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.paused:
                self._wake.wait()
                self._wake.clear()
                continue
            self._wake.clear()
            started = time.monotonic()
            result = self._poll_once(self.focus_host, started)
            self.polls += 1
            if self._stop.is_set():
                return
            self.deliver(result)
            self._wake.wait(max(0.0, self.interval - result.seconds))

    def _poll_once(self, focus: str | None, started: float) -> PolledFrame:
        try:
            frame = self.poll(focus)
        except Exception as exc:  # the source promises not to raise; if it does, say so on screen and go on
            frame = ClusterFrame(timestamp=time.time(), url=self.url, problems=(f"poll failed: {type(exc).__name__}: {exc}",))
        finished = time.monotonic()
        return PolledFrame(frame, finished - started, focus, finished)
