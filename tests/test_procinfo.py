"""Process details between full reads: status, memory and CPU of a known process follow it from /proc/PID/stat
alone and agree with what psutil reads, while name, command line and user come from the cache."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from gpusight.backends.host.procinfo import ProcessDetailsReader
from support.procs import proc_state, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")

GROWER = """
import sys
kept = []
for line in sys.stdin:
    if line.strip() == "grow":
        block = bytearray(64 << 20)
        block[::4096] = b"x" * len(block[::4096])  # touch every page so it is resident
        kept.append(block)
    print("ok", flush=True)
"""


@pytest.fixture
def grower():
    proc = subprocess.Popen([sys.executable, "-c", GROWER, "grower-marker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    yield proc
    proc.kill()
    proc.wait()


def ask(proc: subprocess.Popen, line: str) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "ok"


def test_status_and_memory_of_a_known_process_follow_it_and_match_psutil(grower):
    reader = ProcessDetailsReader()
    ask(grower, "hello")
    first = reader.read(grower.pid)
    assert first.note is None and first.cmdline is not None and first.cmdline.endswith("grower-marker")
    cached = reader.read(grower.pid)
    assert (cached.name, cached.cmdline, cached.user) == (first.name, first.cmdline, first.user)
    assert cached.status == psutil.Process(grower.pid).status() == psutil.STATUS_SLEEPING
    assert cached.rss_bytes == psutil.Process(grower.pid).memory_info().rss

    ask(grower, "grow")
    grown = reader.read(grower.pid)
    assert grown.rss_bytes == psutil.Process(grower.pid).memory_info().rss
    assert cached.rss_bytes is not None and grown.rss_bytes >= cached.rss_bytes + (60 << 20)

    grower.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: proc_state(grower.pid) == "T", "the process to stop")
        stopped = reader.read(grower.pid)
        assert stopped.status == psutil.Process(grower.pid).status() == psutil.STATUS_STOPPED
        assert stopped.note is None and stopped.cmdline == first.cmdline
    finally:
        grower.send_signal(signal.SIGCONT)
    wait_until(lambda: proc_state(grower.pid) == "S", "the process to sleep again")
    assert reader.read(grower.pid).status == psutil.STATUS_SLEEPING


def test_cpu_percent_of_a_known_process_spans_the_time_since_the_previous_read():
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        reader = ProcessDetailsReader()
        assert reader.read(burner.pid).cpu_percent is None  # first sight: no interval yet
        reader.read(burner.pid)  # static facts cached from here on
        before = psutil.Process(burner.pid).cpu_times()
        started = time.monotonic()
        reader.read(burner.pid)
        time.sleep(0.5)
        busy = reader.read(burner.pid)
        elapsed = time.monotonic() - started
        after = psutil.Process(burner.pid).cpu_times()
    finally:
        burner.kill()
        burner.wait()
    spent = (after.user + after.system) - (before.user + before.system)
    assert busy.cpu_percent is not None and busy.cpu_percent > 10
    # The reads lie inside the psutil window: at most the CPU the window saw, over a slightly shorter time.
    assert busy.cpu_percent <= spent / (elapsed - 0.1) * 100 + 5


def test_a_sleeping_process_reads_no_cpu_and_no_wait_for_a_cpu_between_reads():
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        wait_until(lambda: proc_state(sleeper.pid) == "S", "the process to sleep")
        reader = ProcessDetailsReader()
        assert reader.read(sleeper.pid).cpu_wait_percent is None  # first sight: no interval yet
        time.sleep(0.2)
        asleep = reader.read(sleeper.pid)
        assert asleep.cpu_percent == 0.0
        assert asleep.cpu_wait_percent == 0.0  # known, and never runnable: not None, not a guess
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_process_gone_has_no_wait_for_a_cpu():
    sleeper = subprocess.Popen(["sleep", "60"])
    reader = ProcessDetailsReader()
    reader.read(sleeper.pid)
    sleeper.kill()
    sleeper.wait()
    gone = reader.read(sleeper.pid)
    assert gone.note == "exited" and gone.cpu_wait_percent is None  # its /proc/PID/schedstat is gone: unknown


_OPENED: list[str] = []
"""Paths opened since the audit hook was added (every ``open`` and ``os.open`` raises the ``open`` audit event)."""


def _record_opens(event: str, args: tuple) -> None:
    if event == "open" and isinstance(args[0], str) and args[0].startswith("/proc/"):
        _OPENED.append(args[0])


sys.addaudithook(_record_opens)


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_followed_process_is_read_again_without_opening_its_proc_files(grower):
    reader = ProcessDetailsReader()
    ask(grower, "hello")
    reader.read(grower.pid)
    reader.read(grower.pid)  # name, command line and user cached from here on
    _OPENED.clear()
    ask(grower, "grow")
    grown = reader.read(grower.pid)
    opened = [path for path in _OPENED if path.startswith(f"/proc/{grower.pid}/")]
    assert opened == []  # stat, statm and schedstat are read again through the descriptors kept open
    assert grown.rss_bytes == psutil.Process(grower.pid).memory_info().rss  # and they read the process as it is now
    assert grown.status == psutil.Process(grower.pid).status()
    reader.clear()


def test_a_process_that_ended_and_was_forgotten_leaves_no_file_open():
    before = _open_descriptors()
    sleepers = [subprocess.Popen(["sleep", "60"]) for _ in range(3)]
    reader = ProcessDetailsReader()
    for _ in range(2):
        assert all(reader.read(sleeper.pid).note is None for sleeper in sleepers)
        reader.forget_unseen()
    assert _open_descriptors() > before  # the followed processes' files are held open
    for sleeper in sleepers:
        sleeper.kill()
        sleeper.wait()
    assert all(reader.read(sleeper.pid).note == "exited" for sleeper in sleepers)
    reader.forget_unseen()
    assert _open_descriptors() == before
