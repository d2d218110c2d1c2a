"""Safe signalling: real child processes, refusals that leave them alive, and the other-user rules."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import psutil
import pytest

from gpusight.procctl import SignalRefused, protected_pids, send_signal

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start processes as another user")


@pytest.fixture
def child():
    """A real sleeping child process; killed at the end if still alive."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def started(pid: int) -> float:
    """The process's real start time."""
    return psutil.Process(pid).create_time()


def test_sigterm_kills_the_process_it_was_aimed_at(child):
    result = send_signal(child.pid, started(child.pid), signal.SIGTERM)
    assert child.wait(timeout=10) == -signal.SIGTERM
    assert result == f"Sent SIGTERM to PID {child.pid} (sleep)"


def test_gpusight_itself_and_its_ancestors_are_refused():
    # Signal 0 only probes, so a broken refusal cannot hurt the test run.
    for pid in (os.getpid(), os.getppid()):
        with pytest.raises(SignalRefused, match="gpusight itself"):
            send_signal(pid, started(pid), 0)
    assert {os.getpid(), os.getppid(), 1} <= protected_pids()


def test_a_reused_pid_is_refused_and_the_process_survives(child):
    with pytest.raises(SignalRefused, match="reused"):
        send_signal(child.pid, started(child.pid) - 2.0, signal.SIGKILL)
    assert child.poll() is None


def test_an_unknown_start_time_is_refused(child):
    with pytest.raises(SignalRefused, match="start time unknown"):
        send_signal(child.pid, None, signal.SIGKILL)
    assert child.poll() is None


def test_a_vanished_process_gives_a_clear_message():
    proc = subprocess.Popen(["sleep", "600"])
    create_time = started(proc.pid)
    proc.kill()
    proc.wait()
    with pytest.raises(SignalRefused, match=f"PID {proc.pid} no longer exists"):
        send_signal(proc.pid, create_time, signal.SIGTERM)


def test_nonpositive_pids_are_refused():
    for pid in (0, -1):
        with pytest.raises(SignalRefused, match="not a process"):
            send_signal(pid, 0.0, 0)


@as_root
def test_root_may_signal_another_users_process():
    proc = subprocess.Popen(["sleep", "600"], user=NOBODY, group=NOBODY, extra_groups=[])
    try:
        assert psutil.Process(proc.pid).uids().real == NOBODY
        send_signal(proc.pid, started(proc.pid), signal.SIGTERM)
        assert proc.wait(timeout=10) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()


_AS_NOBODY = f"""
import json, os, signal, sys
from gpusight.procctl import SignalRefused, send_signal
os.setgroups([]); os.setgid({NOBODY}); os.setuid({NOBODY})
pid, create_time = int(sys.argv[1]), float(sys.argv[2])
try:
    outcome = send_signal(pid, create_time, signal.SIGKILL)
except SignalRefused as refused:
    outcome = "refused: " + refused.message
print(json.dumps({{"uid": os.getuid(), "outcome": outcome}}))
"""


@as_root
def test_an_ordinary_user_may_not_signal_another_users_process(child):
    # The checker imports as root (the interpreter may live where nobody cannot read), then drops to nobody.
    done = subprocess.run(
        [sys.executable, "-c", _AS_NOBODY, str(child.pid), repr(started(child.pid))],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["uid"] == NOBODY
    assert report["outcome"].startswith("refused: ") and "another user" in report["outcome"]
    assert child.poll() is None
