"""The peak resident memory of a running process and its children, read with psutil every 20 ms.

A memory *bound* is a correctness limit (the issue's 500 MiB), so tests may assert on it; with ``kill_above`` the
process is killed as soon as it passes the bound, so code that would take gigabytes fails fast and cheaply.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil


class PeakRss:
    """Polls the resident memory of ``pid`` and its children every 20 ms and keeps the peak (MiB)."""

    def __init__(self, pid: int, kill_above: float | None = None) -> None:
        self.peak = 0.0
        """The highest sum of resident memory seen so far, in MiB."""
        self.killed = False
        """True once the process passed ``kill_above`` and was killed."""
        self._kill_above = kill_above
        self._process = psutil.Process(pid)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-rss", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            try:
                tree = [self._process, *self._process.children(recursive=True)]
                rss = sum(p.memory_info().rss for p in tree)
            except psutil.Error:
                return
            self.peak = max(self.peak, rss / (1 << 20))
            if self._kill_above is not None and self.peak > self._kill_above:
                self.killed = True
                for process in tree:
                    try:
                        os.kill(process.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                return
            time.sleep(0.02)

    def stop(self) -> float:
        """Stop polling; the peak in MiB."""
        self._done.set()
        self._thread.join()
        return self.peak
