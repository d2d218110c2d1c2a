"""A real headless ``gpusight --record`` in the compact format, killed or stopped: what is on disk replays.

SIGKILL loses at most about the last second (the writer flushes a chunk every 0.75 s); SIGTERM,
SIGINT and SIGHUP close the file cleanly, so the reader reports no interruption.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpusight.recordings.compact import CompactRecording
from gpusight.recordings.formats import COMPACT_MAGIC, RecordingProblem
from gpusight.recordings.opening import read_recording
from gpusight.snapshot.model import Snapshot

INTERVAL = 0.5
DEADLINE = 30.0
LOSS_BOUND = 2.0 + INTERVAL
"""What a kill may lose: the 2 s the format promises plus the poll under way."""


def start(path: Path, scenario: str) -> subprocess.Popen[bytes]:
    """``gpusight --demo SCENARIO --record PATH`` with no terminal (stdin and stdout are not ttys)."""
    return subprocess.Popen([sys.executable, "-m", "gpusight", "--demo", scenario, "--record", str(path),
                             "--interval", str(INTERVAL)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def read(path: Path) -> tuple[list[Snapshot], list[RecordingProblem]]:
    items = list(read_recording(path))
    return [i for i in items if isinstance(i, Snapshot)], [i for i in items if isinstance(i, RecordingProblem)]


def wait_for(path: Path, count: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not (path.exists() and len(read(path)[0]) >= count):
        assert proc.poll() is None, f"gpusight exited early: {proc.stderr.read().decode() if proc.stderr else ''}"
        assert time.monotonic() < deadline, "timed out waiting for recorded snapshots"
        time.sleep(0.1)


def advice_changes(snapshots: list[Snapshot]) -> list[tuple[float, str, bool]]:
    """(timestamp, advice id, raised) wherever an advice id appears or disappears from one snapshot to the next."""
    changes: list[tuple[float, str, bool]] = []
    before: set[str] = set()
    for snapshot in snapshots:
        now = {a.id for a in snapshot.advice}
        changes += [(snapshot.timestamp, i, True) for i in sorted(now - before)]
        changes += [(snapshot.timestamp, i, False) for i in sorted(before - now)]
        before = now
    return changes


@pytest.mark.parametrize("scenario", ["mixed", "input-bound"])
def test_sigkill_loses_at_most_the_last_two_seconds(tmp_path, scenario):
    path = tmp_path / "run"
    proc = start(path, scenario)
    try:
        wait_for(path, 6, proc)
        time.sleep(1.3)  # kill at some moment between two flushes
        killed_at = time.time()
        proc.send_signal(signal.SIGKILL)
        proc.wait(DEADLINE)
    finally:
        proc.kill()
        proc.wait()
    assert path.read_bytes().startswith(COMPACT_MAGIC)
    snapshots, problems = read(path)
    assert len(snapshots) >= 6
    assert [p.unit for p in problems] == ["block"] and "interrupted" in problems[0].message
    assert [s.timestamp for s in snapshots] == sorted(s.timestamp for s in snapshots)
    lost = killed_at - snapshots[-1].timestamp
    assert 0 <= lost <= LOSS_BOUND, f"the last readable snapshot is {lost:.2f} s older than the kill"
    recording = CompactRecording(path)  # the index is rebuilt from the chunks: no summary was written
    try:
        assert recording.last_timestamp == snapshots[-1].timestamp
        assert list(recording.read_from(snapshots[-3].timestamp)) == [*snapshots[-3:], *problems]
        assert list(recording.read_from(None)) == [*snapshots, *problems]
        events = [(e.timestamp, e.advice_id, e.raised) for e in recording.advice_events()]
        assert [e[0] for e in events] == sorted(e[0] for e in events)
        assert sorted(events) == sorted(advice_changes(snapshots)) and events
    finally:
        recording.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_close_the_file_cleanly(tmp_path, sig):
    path = tmp_path / "run.gtop"
    proc = start(path, "mixed")
    try:
        wait_for(path, 3, proc)
        proc.send_signal(sig)
        assert proc.wait(DEADLINE) == 0
    finally:
        proc.kill()
        proc.wait()
    snapshots, problems = read(path)
    assert len(snapshots) >= 3 and problems == []


def test_recording_again_appends_a_segment(tmp_path):
    path = tmp_path / "run"
    for _ in range(2):
        proc = start(path, "healthy")
        try:
            wait_for(path, 2 + len(read(path)[0]) if path.exists() else 2, proc)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(DEADLINE) == 0
        finally:
            proc.kill()
            proc.wait()
    snapshots, problems = read(path)
    assert problems == [] and len(snapshots) >= 4
    assert path.read_bytes().count(COMPACT_MAGIC) == 2
