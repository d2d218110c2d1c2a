"""Hostile recordings: millions of damaged lines are counted, not stored, and only regular files are replayed.

Each case runs the real CLI (``python -m gpusight --replay FILE --once``) in a subprocess, on real files,
FIFOs and devices, with a deadline so that a hang fails instead of blocking the suite.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gpusight.demo.source import DemoSource
from gpusight.recordings.replay import MAX_SHOWN_PROBLEMS, ReplaySource
from gpusight.snapshot.serialize import snapshot_to_json

DAMAGED_LINES = 1_000_000
"""Damaged lines in the large recording: enough that keeping a message for each costs hundreds of MB."""

DAMAGE = (b'{"schema": 1, "timestamp": tru', b"garbage", b"[1, 2, 3]", b'{"schema": 1}', b"\xff\xfe{}")
"""Kinds of damage, repeated in turn: cut off, not JSON, not an object, missing keys, not UTF-8."""

MAX_PEAK_RSS_BYTES = 100 * 1024 * 1024
"""Peak resident memory allowed for replaying the large recording (about 20 MB; a message kept per line took 200 MB)."""

DEADLINE = 120.0
"""Seconds the CLI may take on the large recording (slow shared machines included) before it counts as hung."""

GOOD_SNAPSHOTS = 3


def good_lines(count: int) -> bytes:
    """``count`` demo snapshots, half a second apart, as recording lines."""
    clock = itertools.count()
    source = DemoSource("mixed", seed=3, clock=lambda: 1_750_000_000.0 + next(clock) * 0.5)
    return b"".join(snapshot_to_json(source.poll()).encode() + b"\n" for _ in range(count))


def write_damaged_recording(path: Path, damaged: int) -> Path:
    """Write ``damaged`` damaged lines, the kinds of DAMAGE in turn, followed by a few good snapshots."""
    block = b"\n".join(DAMAGE) + b"\n"
    repeats, rest = divmod(damaged, len(DAMAGE))
    with open(path, "wb") as file:
        file.write(block * repeats + b"".join(line + b"\n" for line in DAMAGE[:rest]))
        file.write(good_lines(GOOD_SNAPSHOTS))
    return path


@pytest.fixture(scope="module")
def damaged_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording of DAMAGED_LINES damaged lines followed by a few good snapshots."""
    return write_damaged_recording(tmp_path_factory.mktemp("damaged") / "damaged.jsonl", DAMAGED_LINES)


_MEASURE_PEAK = """
import resource, subprocess, sys
status = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024))
sys.exit(status)
"""
"""Runs a command and writes its peak RSS in bytes to a file (Linux counts ``ru_maxrss`` in KiB)."""


def run_measured(args: list[str], workdir: Path) -> tuple[int, str, str, int]:
    """Run the CLI with ``args``; return its exit status, stdout, stderr and its peak RSS in bytes.

    The CLI runs under a small Python parent that reports ``RUSAGE_CHILDREN``: a child's peak also
    counts the memory of the process it was forked from, which for the test runner can be large.
    """
    peak_file = workdir / "peak"
    command = [sys.executable, "-c", _MEASURE_PEAK, str(peak_file), sys.executable, "-m", "gpusight", *args]
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"gpusight {' '.join(args)} did not finish within {DEADLINE:.0f} s")
    return proc.returncode, out, err, int(peak_file.read_text())


def test_a_million_damaged_lines_are_counted_in_one_line_with_bounded_memory(damaged_recording, tmp_path):
    status, out, err, peak_rss = run_measured(["--replay", str(damaged_recording), "--once"], tmp_path)
    assert status == 0, err
    assert "Traceback" not in err
    notes = [line.strip() for line in out.splitlines() if line.strip().startswith("replay: ")]
    shown = [note for note in notes if note.startswith("replay: line ")]
    assert len(shown) == MAX_SHOWN_PROBLEMS
    assert notes.count(f"replay: {DAMAGED_LINES - MAX_SHOWN_PROBLEMS} more damaged lines skipped") == 1
    assert "NVIDIA" in out  # the good snapshots after the damage were played
    assert peak_rss < MAX_PEAK_RSS_BYTES, f"peak RSS {peak_rss / 2**20:.0f} MiB"


def read_bytes_of_this_process() -> int:
    """Bytes this process has read through system calls so far (``rchar`` in /proc/self/io)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs /proc/self/io")
def test_opening_a_damaged_recording_reads_it_once(tmp_path):
    recording = write_damaged_recording(tmp_path / "damaged.jsonl", 100_000)
    size = recording.stat().st_size
    before = read_bytes_of_this_process()
    source = ReplaySource(recording)
    read = read_bytes_of_this_process() - before
    assert source.recorded_interval == pytest.approx(0.5)  # measured from the good snapshots behind the damage
    assert size <= read < 1.5 * size, f"read {read} bytes of a {size}-byte recording to start playback"
    first = source.poll()
    assert first.devices and [e.message for e in first.errors][-1].endswith(" more damaged lines skipped")
    source.close()


def test_damage_between_snapshots_does_not_hold_back_the_start(tmp_path):
    good = good_lines(3).splitlines(keepends=True)
    path = tmp_path / "gap.jsonl"
    path.write_bytes(good[0] + b'{"schema": 1, "timest\n' * 300_000 + b"".join(good[1:]))
    before = read_bytes_of_this_process()
    source = ReplaySource(path)
    read = read_bytes_of_this_process() - before
    assert read < path.stat().st_size / 2, "starting playback read on through the damage"
    assert source.recorded_interval is None  # the read-ahead stopped at the damage
    polled = [source.poll() for _ in range(3)]
    assert [p.timestamp for p in polled] == sorted({p.timestamp for p in polled})
    # damage is reported with the snapshot before it, once playback reads past it
    assert polled[0].errors[-1].message == f"{300_000 - MAX_SHOWN_PROBLEMS} more damaged lines skipped"
    assert polled[2].errors == polled[0].errors
    assert source.finished
    source.close()


def test_a_looping_replay_counts_each_damaged_line_once(tmp_path):
    good = good_lines(2).splitlines(keepends=True)
    path = tmp_path / "loop.jsonl"
    path.write_bytes(good[0] + b"garbage\n" * (MAX_SHOWN_PROBLEMS + 3) + good[1])
    source = ReplaySource(path, loop=True)
    errors = [source.poll().errors for _ in range(9)]
    assert errors[-1] == errors[1]
    assert errors[-1][-1].message == "3 more damaged lines skipped"
    source.close()


def refused(path: Path) -> None:
    """The CLI refuses ``path`` as a recording within a few seconds, in one line, with status 1."""
    done = subprocess.run([sys.executable, "-m", "gpusight", "--replay", str(path), "--once"],
                          capture_output=True, text=True, timeout=30, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"gpusight: cannot read recording {path}: not a regular file")
    assert done.stdout == ""


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    refused(fifo)


def test_a_symlink_to_a_fifo_is_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link.jsonl"
    link.symlink_to(fifo)
    refused(link)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_an_endless_device_is_refused(device):
    if not Path(device).exists():
        pytest.skip(f"no {device} here")
    refused(Path(device))


def test_a_directory_is_refused(tmp_path):
    refused(tmp_path)


def test_a_symlink_to_a_recording_is_replayed(tmp_path):
    recording = tmp_path / "real.jsonl"
    recording.write_bytes(good_lines(2))
    link = tmp_path / "link.jsonl"
    link.symlink_to(recording)
    done = subprocess.run([sys.executable, "-m", "gpusight", "--replay", str(link), "--once"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "replay: link.jsonl" in done.stdout
