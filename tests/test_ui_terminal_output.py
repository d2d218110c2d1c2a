"""What a steady screen sends to a real terminal: only the cells that changed.

A recording whose snapshots differ only in time (the clock, each process's elapsed time) is replayed
in a pty. Once the screen is up, a full redraw of the process table would re-send every row, PIDs
included; a cell-level update sends just the elapsed times (at 160 columns) or nothing at all for the
table (at 80 columns, where the ELAPSED column is not shown). The same holds with the JOB column shown.
"""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

import pytest

from gpusight.demo.source import DemoSource
from gpusight.recordings.jsonl.writer import JsonlWriter
from support.jobs import with_jobs
from support.terminal import PtyGpusight

INTERVAL = 0.25
SNAPSHOTS = 120
CURSOR_MOVE = re.compile(rb"\x1b\[\d+;\d+H")


def steady_recording(path: Path, jobs: bool = False) -> list[int]:
    """``SNAPSHOTS`` copies of one demo snapshot (with ``jobs``), ``INTERVAL`` apart; returns the processes' PIDs."""
    first = DemoSource("healthy", clock=lambda: 1_800_000_000.0).poll()
    if jobs:
        first = with_jobs(first)
    recorder = JsonlWriter(path)
    for step in range(SNAPSHOTS):
        later = step * INTERVAL
        processes = tuple(
            dataclasses.replace(p, elapsed_seconds=None if p.elapsed_seconds is None else p.elapsed_seconds + later)
            for p in first.processes
        )
        recorder.write(dataclasses.replace(first, timestamp=first.timestamp + later, processes=processes))
    recorder.close()
    return [p.pid for p in first.processes]


@pytest.mark.parametrize("jobs", [False, True])
@pytest.mark.parametrize("size", [(160, 45), (80, 24)])
def test_a_steady_screen_resends_no_process_rows(tmp_path: Path, size: tuple[int, int], jobs: bool) -> None:
    recording = tmp_path / "steady.jsonl"
    pids = steady_recording(recording, jobs)
    app = PtyGpusight(size, controlling=True, args=("--replay", str(recording), "--no-advice"))
    job = ("job 1 · rank 0/4" if size[0] >= 160 else "1·0/4").encode() if jobs else b""
    try:
        app.wait_for(
            lambda: b"replay" in app.output and str(pids[0]).encode() in app.output and job in app.output,
            "the replayed screen",
        )
        time.sleep(4.0)  # the first polls fill the mini charts and settle the layout
        start = len(app.output)
        time.sleep(6.0)
        later = bytes(app.output[start:])
        assert app.proc.poll() is None, "gpusight should still be replaying"
    finally:
        app.cleanup()
    if size[0] >= 160:
        assert len(CURSOR_MOVE.findall(later)) >= 4, "the header's clock and the elapsed times should still tick"
    resent = [pid for pid in pids if str(pid).encode() in later]
    assert resent == [], f"process rows were redrawn whole: {later[:600]!r}"
    assert not jobs or b"rank" not in later and b"/4" not in later, "job cells were sent again"
