"""Headless recording (no terminal) runs until a signal and then closes its file cleanly: real ``gpusight`` processes."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpusight.recordings.formats import RecordingProblem
from gpusight.recordings.opening import read_recording
from gpusight.snapshot.model import Snapshot

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


def _keeps_recording_after_a_hangup(path: Path, proc: subprocess.Popen) -> None:
    """Three more snapshots reach ``path`` after a SIGHUP sent to the recorder, and ``proc`` is still running."""
    before = len(_snapshots_and_problems(path)[0])
    deadline = time.monotonic() + DEADLINE
    while len(_snapshots_and_problems(path)[0]) < before + 3:
        assert proc.poll() is None, "the recorder stopped on a hangup that nohup ignores"
        assert time.monotonic() < deadline, "the recorder stopped writing after the hangup"
        time.sleep(0.05)


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
        _keeps_recording_after_a_hangup(path, proc)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert _snapshots_and_problems(path)[1] == []


def _ignores_sigint(status: str) -> bool:
    """Whether a copy of /proc/PID/status says its process ignores SIGINT (its SigIgn mask)."""
    for line in status.splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGINT - 1) & 1)
    raise AssertionError("no SigIgn line")


@contextlib.contextmanager
def _recorder_from_script(path: Path, log: Path, wrapper: str = "") -> Iterator[tuple[subprocess.Popen, int]]:
    """A recorder started with ``&`` by a non-interactive bash (no job control), optionally under ``wrapper``
    (e.g. nohup), once it has recorded 3 snapshots; yields the shell and the recorder's PID, and kills what is left
    of them afterwards.

    The background job is a ``sh`` that copies its /proc status to ``log``'s ``.status`` sibling (what the shell
    handed over: a non-interactive sh keeps what it inherited ignored), then execs the recorder in its place. The
    shell prints the recorder's exit status (``status N``) to ``log``'s ``.shell`` sibling.
    """
    script = (f'{wrapper} sh -c \'cat /proc/self/status >"$0"; exec "$@"\' "$2.status" '
              '"$0" -m gpusight --demo input-bound --record "$1" --interval 0.1 </dev/null >"$2" 2>&1 & '
              'echo $! >"$2.pid"; wait $!; echo "status $?" >"$2.shell"')
    shell = subprocess.Popen(["bash", "-c", script, sys.executable, str(path), str(log)], stdin=subprocess.DEVNULL)
    pid_file = Path(f"{log}.pid")
    try:
        deadline = time.monotonic() + DEADLINE
        while not (pid_file.exists() and path.exists() and len(_snapshots_and_problems(path)[0]) >= 3):
            assert shell.poll() is None, f"the recorder exited early: {log.read_text()}"
            assert time.monotonic() < deadline, "no snapshots recorded in time"
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        try:
            yield shell, pid
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    finally:
        shell.kill()
        shell.wait(15)


def _sigint_closes_the_recording(shell: subprocess.Popen, pid: int, path: Path, log: Path) -> None:
    """``kill -INT`` the recorder: it exits 0 promptly, saying what it recorded, and the file reads back whole."""
    os.kill(pid, signal.SIGINT)
    shell.wait(15)  # the shell ends once the recorder has (TimeoutExpired: SIGINT did not stop it)
    assert Path(f"{log}.shell").read_text().strip() == "status 0", log.read_text()
    assert "recorded" in log.read_text()
    snapshots, problems = _snapshots_and_problems(path)
    assert problems == []
    assert len(snapshots) >= 3


def test_a_recorder_started_in_the_background_by_a_script_stops_on_sigint(tmp_path):
    """A non-interactive shell starts background jobs with SIGINT ignored; ``kill -INT`` must still end the recording."""
    path, log = tmp_path / "background.gtr", tmp_path / "log"
    with _recorder_from_script(path, log) as (shell, pid):
        assert _ignores_sigint(Path(f"{log}.status").read_text())  # what the shell handed over: the case tested
        _sigint_closes_the_recording(shell, pid, path, log)


def test_under_nohup_in_a_script_a_hangup_is_ignored_and_sigint_stops_the_recording(tmp_path):
    path, log = tmp_path / "nohup.gtr", tmp_path / "log"
    with _recorder_from_script(path, log, wrapper="nohup") as (shell, pid):
        os.kill(pid, signal.SIGHUP)
        _keeps_recording_after_a_hangup(path, shell)
        _sigint_closes_the_recording(shell, pid, path, log)
