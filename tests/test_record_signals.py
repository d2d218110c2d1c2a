"""Headless recording (no terminal) runs until a signal and then closes its file cleanly: real ``gpusight`` processes."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpusight.collect.model import Snapshot
from gpusight.recordings.formats import RecordingProblem
from gpusight.recordings.opening import read_recording

DEADLINE = 30.0
"""Seconds a recorder gets to start and write its first snapshots."""

FORMATS = ["run.jsonl", "run.jsonl.gz", "run.gtr"]
"""Recording names, one per written format."""


def _snapshots_and_problems(path: Path) -> tuple[list[Snapshot], list[RecordingProblem]]:
    items = list(read_recording(path))
    return [i for i in items if isinstance(i, Snapshot)], [i for i in items if isinstance(i, RecordingProblem)]


def _start(path: Path, **popen) -> subprocess.Popen:
    """``gpusight --demo stalled --record PATH`` with stdin, stdout and stderr not terminals; waits for 3 snapshots."""
    proc = subprocess.Popen([sys.executable, "-m", "gpusight", "--demo", "input-bound", "--record", str(path),
                             "--interval", "0.1"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    deadline = time.monotonic() + DEADLINE
    while not (path.exists() and len(_snapshots_and_problems(path)[0]) >= 3):
        assert proc.poll() is None, f"gpusight exited early with {proc.returncode}: {proc.stderr.read()}"
        assert time.monotonic() < deadline, "no snapshots recorded in time"
        time.sleep(0.05)
    return proc


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_headless_recording_closes_cleanly_on_each_signal(tmp_path, name, sig):
    path = tmp_path / name
    proc = _start(path)
    try:
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out == ""
    assert "recorded" in err and "Traceback" not in err
    snapshots, problems = _snapshots_and_problems(path)
    assert problems == []
    assert len(snapshots) >= 3
    timestamps = [s.timestamp for s in snapshots]
    assert timestamps == sorted(timestamps)


def test_a_hangup_ignored_by_nohup_does_not_stop_the_recording(tmp_path):
    """Under ``nohup`` (SIGHUP ignored on entry) the recorder keeps going; SIGTERM still stops it."""
    path = tmp_path / "nohup.jsonl"
    proc = _start(path, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        proc.send_signal(signal.SIGHUP)
        before = len(_snapshots_and_problems(path)[0])
        deadline = time.monotonic() + DEADLINE
        while len(_snapshots_and_problems(path)[0]) < before + 3:
            assert proc.poll() is None, "the recorder stopped on a hangup that nohup ignores"
            assert time.monotonic() < deadline, "the recorder stopped writing after the hangup"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert _snapshots_and_problems(path)[1] == []
