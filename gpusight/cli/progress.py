"""A progress bar on stderr while a whole recording is read (``--convert``, ``--report``, ``--replay FILE --at WHEN``)
or while ``--check`` and ``--once --duration`` sample.

The readers tell a :class:`gpusight.recordings.progress.ReadProgress` how far they have got (the samplers tell it
the seconds sampled, in place of bytes read); this module draws one with Rich, on stderr, and only when stderr is a terminal: anywhere else nothing is written, not
even an escape sequence. The bar appears once a read has run for :data:`SHOW_AFTER_S` (a short read stays
quiet) and is removed when the read ends, before the command prints its own lines. Rich is imported then,
so other commands never load it.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gpusight.textsafe import safe_text

if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn, TaskID

    from gpusight.recordings.progress import ReadProgress

SHOW_AFTER_S = 0.5
"""Seconds a read runs before its bar appears."""

REDRAWS_PER_S = 5
"""How often Rich redraws the bar, on a thread of its own (a drawing costs about a millisecond of CPU)."""

UPDATE_EVERY_S = 1 / REDRAWS_PER_S
"""Least seconds between two updates of the bar's figures: one per drawing."""

NAME_WIDTH = 40
"""Characters of the file's name shown at most."""

Counts = Literal["bytes", "seconds"]
"""What a bar counts: bytes of a file read, or seconds of a sampling run."""


class StderrProgressBar:
    """A :class:`ReadProgress` drawn on stderr: what is done to which file, a bar, the percentage of the file read,
    the bytes read of its size, the rate and the time left; or, counting seconds, what is sampled, a bar and the
    seconds sampled of those asked for (``sampling live data ━━━╸━━ 12/60 s``).

    Telling it how far a read has got costs a clock reading, except every :data:`UPDATE_EVERY_S`. Any thread may
    tell it; after :meth:`close` it draws nothing more.
    """

    def __init__(self, description: str, counts: Counts = "bytes") -> None:
        self.description = description
        """What is being done, e.g. ``converting run.gtop``."""
        self.counts: Counts = counts
        """What the figures count."""
        self._lock = threading.Lock()
        self._total = 0
        self._next_update = math.inf  # monotonic time of the next update of the figures: never outside a read
        self._closed = False
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def begin(self, total: int) -> None:
        """A read of ``total`` bytes starts: its bar appears after :data:`SHOW_AFTER_S`, if it is still going."""
        with self._lock:
            if not self._closed:
                self._total = total
                self._next_update = time.monotonic() + SHOW_AFTER_S

    def reached(self, position: int) -> None:
        """``position`` bytes of the file have been read."""
        if time.monotonic() < self._next_update:
            return
        with self._lock:
            if self._closed or self._next_update == math.inf:
                return
            self._next_update = time.monotonic() + UPDATE_EVERY_S
            self._total = max(self._total, position)  # a file still being written grows
            if self._bar is None:
                self._bar, self._task = _show(self.description, self._total, position, self.counts)
            else:
                assert self._task is not None
                self._bar.update(self._task, completed=position, total=self._total)

    def end(self) -> None:
        """The read is over: the bar (if shown) is removed, leaving the terminal as it was."""
        with self._lock:
            self._next_update = math.inf
            bar, self._bar, self._task = self._bar, None, None
        if bar is not None:
            bar.stop()

    def close(self) -> None:
        """End any read and draw nothing more, whatever other threads still tell."""
        with self._lock:
            self._closed = True
        self.end()


def _show(description: str, total: int, position: int, counts: Counts) -> tuple[Progress, TaskID]:
    """Start drawing a bar on stderr that is removed when stopped; the file's name is shown as text, never as markup."""
    from rich.console import Console
    from rich.progress import Progress

    bar = Progress(
        *_columns(counts), console=Console(stderr=True), refresh_per_second=REDRAWS_PER_S, transient=True,
        redirect_stdout=False, redirect_stderr=False,
    )
    task = bar.add_task(description, total=total, completed=position)
    bar.start()
    return bar, task


def _columns(counts: Counts) -> list[ProgressColumn]:
    """The bar's columns: the description and a bar, then the bytes read or the seconds sampled."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    start = [TextColumn("{task.description}", markup=False), BarColumn()]
    if counts == "seconds":
        return [*start, TextColumn("{task.completed:.0f}/{task.total:.0f} s")]
    return [*start, TaskProgressColumn(), DownloadColumn(), TransferSpeedColumn(), TextColumn("ETA"),
            TimeRemainingColumn()]


def reading_description(verb: str, path: str | Path) -> str:
    """``converting run.gtop``: ``verb`` and the file's name, made safe to print (escapes and control characters go)."""
    return f"{verb} {safe_text(Path(path).name, NAME_WIDTH)}"


@contextmanager
def stderr_progress(description: str, *, wanted: bool = True, counts: Counts = "bytes") -> Iterator[ReadProgress | None]:
    """A progress bar for the reads (or the sampling) done inside the block when ``wanted`` and stderr is a terminal,
    else None.

    The bar is gone when the block is left, however it is left (an error, Ctrl-C).
    """
    if not (wanted and stderr_is_terminal()):
        yield None
        return
    bar = StderrProgressBar(description, counts)
    try:
        yield bar
    finally:
        bar.close()


def stderr_is_terminal() -> bool:
    """True when stderr is open on a terminal."""
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except ValueError:  # closed
        return False
