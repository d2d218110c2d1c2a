"""Data safety: recordings survive the real CLI being killed, and full or read-only disks give clear errors.

Written against real files: ``/dev/full`` (every write fails with ENOSPC), a read-only tmpfs (EROFS;
needs root, skipped otherwise) and recordings made by a real ``gpusight`` process killed mid-run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpusight.demo.source import DemoSource
from gpusight.recordings.formats import RecordingError, RecordingProblem
from gpusight.recordings.jsonl.writer import JsonlWriter
from gpusight.recordings.opening import read_recording
from gpusight.sampling.history import History
from gpusight.sampling.sampler import Sampler
from gpusight.snapshot.model import Snapshot
from gpusight.snapshot.serialize import snapshot_from_dict
from gpusight.snapshot_export.export_set import ExportError, export_snapshot
from support.terminal import PtyGpusight

DEV_FULL = Path("/dev/full")
"""A device on which every write fails with "No space left on device"."""

DEADLINE = 30.0
"""Seconds a step may take before the test calls it a hang."""

needs_dev_full = pytest.mark.skipif(not DEV_FULL.exists(), reason="needs /dev/full")


def gpusight_command(*args: str) -> list[str]:
    """The CLI run as a module with ``args``."""
    return [sys.executable, "-m", "gpusight", *args]


def wait_for_snapshots(path: Path, count: int, proc: subprocess.Popen) -> None:
    """Wait until ``path`` holds at least ``count`` readable snapshots (failing if the writer died or hung)."""
    deadline = time.monotonic() + DEADLINE
    while not (path.exists() and len(snapshots_and_problems(path)[0]) >= count):
        assert proc.poll() is None, f"gpusight exited early with {proc.returncode}"
        assert time.monotonic() < deadline, "timed out waiting for recorded lines"
        time.sleep(0.05)


def snapshots_and_problems(path: Path) -> tuple[list[Snapshot], list[RecordingProblem]]:
    """Everything read back from a recording, split into snapshots and problems."""
    items = list(read_recording(path))
    return [i for i in items if isinstance(i, Snapshot)], [i for i in items if isinstance(i, RecordingProblem)]


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A read-only tmpfs mount (EROFS even for root), or a skip where mounting is not permitted."""
    mount_point = tmp_path / "ro"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mount_point)],
                          check=False, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", str(mount_point)], check=True)


def demo_sampler(**kwargs: object) -> Sampler:
    """A sampler over the demo with a stepping clock."""
    clock = iter(range(1_700_000_000, 1_800_000_000))
    return Sampler(DemoSource("mixed", seed=2, clock=lambda: float(next(clock))), 0.1, History(50), **kwargs)


@needs_dev_full
def test_a_full_disk_stops_the_recording_with_a_standing_note_and_polling_goes_on():
    sampler = demo_sampler(recorder=JsonlWriter(DEV_FULL))

    snapshots = [sampler.poll_once() for _ in range(4)]

    assert sampler.recorder is None
    for snapshot in snapshots:
        notes = [e for e in snapshot.errors if e.scope == "record"]
        assert len(notes) == 1
        assert "No space left on device" in notes[0].message and "\n" not in notes[0].message
    assert len({s.timestamp for s in snapshots}) == 4


@needs_dev_full
def test_a_full_disk_on_a_single_write_is_a_one_line_recording_error():
    recorder = JsonlWriter(DEV_FULL)
    snapshot = demo_sampler().poll_once()
    with pytest.raises(RecordingError) as caught:
        recorder.write(snapshot)
    recorder.close()
    assert str(caught.value) == f"cannot write recording {DEV_FULL}: No space left on device"


def test_a_read_only_file_system_is_refused_in_one_line_for_recordings_and_exports(read_only_dir):
    sampler = demo_sampler()
    snapshot = sampler.poll_once()
    for name in ("run.jsonl", "run.jsonl.gz"):
        with pytest.raises(RecordingError) as caught:
            JsonlWriter(read_only_dir / name)
        assert "Read-only file system" in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(ExportError) as exported:
        export_snapshot(read_only_dir, snapshot, sampler.history, "<svg/>")
    assert "Read-only file system" in str(exported.value) and "\n" not in str(exported.value)
    assert list(read_only_dir.iterdir()) == []
    cli = subprocess.run(gpusight_command("--demo", "--once", "--record", str(read_only_dir / "x.jsonl")),
                         capture_output=True, text=True, timeout=60, check=False)
    assert cli.returncode == 1
    assert cli.stderr.startswith("gpusight: ") and "Read-only file system" in cli.stderr
    assert len(cli.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("name", ["run.jsonl", "run.jsonl.gz"])
def test_sigkill_of_the_headless_recorder_loses_at_most_the_last_line(tmp_path, name):
    path = tmp_path / name
    proc = subprocess.Popen(gpusight_command("--demo", "--record", str(path), "--interval", "0.25"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_snapshots(path, 5, proc)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()

    snapshots, problems = snapshots_and_problems(path)
    assert len(snapshots) >= 5
    assert len(problems) <= 1
    items = list(read_recording(path))
    assert all(isinstance(item, Snapshot) for item in items[:-1])  # only the very last line may be damaged
    assert [s.timestamp for s in snapshots] == sorted(s.timestamp for s in snapshots)


def test_sigterm_of_the_live_ui_keeps_a_parseable_recording(tmp_path):
    path = tmp_path / "ui.jsonl"
    app = PtyGpusight((100, 30), controlling=False, args=("--demo", "--record", str(path), "--interval", "0.25"))
    try:
        app.wait_for(lambda: path.exists() and path.read_bytes().count(b"\n") >= 5, "five recorded snapshots")
        app.proc.send_signal(signal.SIGTERM)
        status = app.reap()
    finally:
        app.cleanup()

    assert status == 143
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) >= 5 and all(line.endswith(b"\n") for line in lines)
    assert all(snapshot_from_dict(json.loads(line), complete=True).source == "demo" for line in lines)
    snapshots, problems = snapshots_and_problems(path)
    assert problems == [] and len(snapshots) == len(lines)


@needs_dev_full
def test_headless_recording_to_a_full_disk_stops_with_a_clear_error():
    proc = subprocess.Popen(gpusight_command("--demo", "healthy", "--record", str(DEV_FULL), "--interval", "1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=6)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail("gpusight went on 'recording' to a full disk")
    assert proc.returncode == 1
    assert "No space left on device" in err
