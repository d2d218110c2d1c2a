"""Record and replay: exact round trips, and damaged recordings that are reported line by line, never fatal."""

import gzip
import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from gpusight.demo.source import DemoSource
from gpusight.recordings.formats import RecordingError, RecordingProblem
from gpusight.recordings.jsonl.reader import MAX_LINE_BYTES
from gpusight.recordings.jsonl.writer import JsonlWriter
from gpusight.recordings.opening import read_recording
from gpusight.recordings.replay import MAX_SHOWN_PROBLEMS, ReplayError, ReplaySource
from gpusight.snapshot.model import ErrorNote, Snapshot

START = 1_750_000_000.0
STEP = 0.5


def demo_snapshots(count: int, scenario: str = "mixed") -> list[Snapshot]:
    now = [START]
    source = DemoSource(scenario, seed=7, clock=lambda: now[0])
    snapshots = []
    for i in range(count):
        now[0] = START + i * STEP
        snapshots.append(source.poll())
    return snapshots


def record(path, snapshots) -> None:
    recorder = JsonlWriter(path)
    for snapshot in snapshots:
        recorder.write(snapshot)
    recorder.close()


def split(items):
    snapshots = [i for i in items if isinstance(i, Snapshot)]
    problems = [i for i in items if isinstance(i, RecordingProblem)]
    assert len(snapshots) + len(problems) == len(items)
    return snapshots, problems


def plain_lines(snapshots) -> list[bytes]:
    from gpusight.snapshot.serialize import snapshot_to_json

    return [snapshot_to_json(s).encode() + b"\n" for s in snapshots]


@pytest.fixture(scope="module")
def snapshots():
    return demo_snapshots(12)


@pytest.mark.parametrize("name", ["run.jsonl", "run.jsonl.gz"])
def test_record_then_read_round_trips_exactly(tmp_path, snapshots, name):
    path = tmp_path / name
    record(path, snapshots)
    assert list(read_recording(path)) == snapshots
    if name.endswith(".gz"):
        assert gzip.decompress(path.read_bytes()).count(b"\n") == len(snapshots)
    else:
        assert path.read_bytes().count(b"\n") == len(snapshots)


@pytest.mark.parametrize("name", ["run.jsonl", "run.jsonl.gz"])
def test_replay_returns_each_snapshot_relabelled_then_holds_the_last(tmp_path, snapshots, name):
    path = tmp_path / name
    record(path, snapshots)
    source = ReplaySource(path)
    assert source.recorded_interval == pytest.approx(STEP)
    replayed = []
    for _ in snapshots:
        assert not source.finished
        replayed.append(source.poll())
    assert source.finished
    date = time.strftime("%Y-%m-%d %H:%M", time.localtime(START))
    for original, copy in zip(snapshots, replayed, strict=True):
        assert copy.source == "replay"
        assert copy.label == f"replay: {name} (recorded {date}, source demo, no advice recorded)"
        assert copy.errors == ()
        assert copy.devices == original.devices and copy.processes == original.processes
        assert copy.host == original.host and copy.driver == original.driver
        assert copy.timestamp == original.timestamp
    again = source.poll()
    assert again.timestamp == snapshots[-1].timestamp and again.devices == snapshots[-1].devices
    source.close()


def test_opening_an_existing_recording_appends(tmp_path, snapshots):
    for name in ("a.jsonl", "a.jsonl.gz"):
        path = tmp_path / name
        record(path, snapshots[:5])
        record(path, snapshots[5:])
        assert list(read_recording(path)) == snapshots


def test_loop_starts_again_with_time_moving_forward(tmp_path, snapshots):
    path = tmp_path / "loop.jsonl"
    record(path, snapshots[:3])
    source = ReplaySource(path, loop=True)
    polled = [source.poll() for _ in range(7)]
    assert not source.finished
    assert [p.devices for p in polled] == [s.devices for s in snapshots[:3]] * 2 + [snapshots[0].devices]
    stamps = [p.timestamp for p in polled]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    source.close()


def test_single_snapshot_has_no_recorded_interval(tmp_path, snapshots):
    path = tmp_path / "one.jsonl"
    record(path, snapshots[:1])
    source = ReplaySource(path)
    assert source.recorded_interval is None
    assert source.poll().devices == snapshots[0].devices
    assert source.finished
    source.close()


def test_corrupt_line_in_the_middle_is_reported_and_skipped(tmp_path, snapshots):
    lines = plain_lines(snapshots)
    lines[4] = lines[4][: len(lines[4]) // 2] + b"\n"
    path = tmp_path / "corrupt.jsonl"
    path.write_bytes(b"".join(lines))
    got, problems = split(list(read_recording(path)))
    assert got == snapshots[:4] + snapshots[5:]
    assert [p.line for p in problems] == [5]
    assert "JSON" in problems[0].message
    source = ReplaySource(path)
    per_poll = [source.poll().errors for _ in range(len(snapshots) + 3)]
    note = ErrorNote("replay", "line 5: not valid JSON (truncated or corrupt)")
    assert per_poll[:3] == [(), (), ()]
    assert all(errors == (note,) for errors in per_poll[3:])  # stays on screen once met, listed once
    source.close()


def test_many_damaged_lines_are_listed_up_to_a_limit_then_counted(tmp_path, snapshots):
    lines = plain_lines(snapshots)
    for i in range(1, 9):
        lines[i] = b"{broken\n"
    path = tmp_path / "many.jsonl"
    path.write_bytes(b"".join(lines))
    source = ReplaySource(path)
    errors = [source.poll().errors for _ in range(len(snapshots))][-1]
    assert [e.message for e in errors][:MAX_SHOWN_PROBLEMS] == [f"line {n}: not valid JSON (truncated or corrupt)" for n in range(2, 2 + MAX_SHOWN_PROBLEMS)]
    assert errors[-1].message == f"{8 - MAX_SHOWN_PROBLEMS} more damaged lines skipped"
    source.close()


def test_truncated_last_line_is_reported_and_the_rest_replays(tmp_path, snapshots):
    path = tmp_path / "cut.jsonl"
    data = b"".join(plain_lines(snapshots))
    path.write_bytes(data[:-500])
    got, problems = split(list(read_recording(path)))
    assert got == snapshots[:-1]
    assert [str(p) for p in problems] == [f"line {len(snapshots)}: incomplete last line (recording interrupted)"]


def test_appending_after_a_cut_off_line_keeps_new_lines_readable(tmp_path, snapshots):
    path = tmp_path / "cut.jsonl"
    path.write_bytes(b"".join(plain_lines(snapshots[:3]))[:-10])
    record(path, snapshots[3:6])
    got, problems = split(list(read_recording(path)))
    assert got == snapshots[:2] + snapshots[3:6]
    assert [p.line for p in problems] == [3]


def test_truncated_gzip_ends_with_a_problem_not_an_exception(tmp_path, snapshots):
    path = tmp_path / "cut.jsonl.gz"
    record(path, snapshots)
    data = path.read_bytes()
    for cut in (40, 400, len(data) // 2):
        path.write_bytes(data[:-cut])
        items = list(read_recording(path))
        got, problems = split(items)
        assert got == snapshots[: len(got)] and len(got) >= len(snapshots) // 2 - 1
        assert problems == [items[-1]] and "cut off" in problems[0].message
    # cut inside the last member's checksum trailer: its line is whole, the missing check is still reported
    path.write_bytes(data[:-3])
    items = list(read_recording(path))
    assert items[:-1] == snapshots and "cut off" in items[-1].message


def test_damaged_gzip_member_is_skipped_and_later_members_read(tmp_path, snapshots):
    path = tmp_path / "bad.jsonl.gz"
    members = [gzip.compress(line, mtime=0) for line in plain_lines(snapshots)]
    damaged = bytearray(members[6])
    middle = len(damaged) // 2
    damaged[middle : middle + 8] = bytes(b ^ 0x5A for b in damaged[middle : middle + 8])
    members[6] = bytes(damaged)
    path.write_bytes(b"".join(members))
    got, problems = split(list(read_recording(path)))
    assert got == snapshots[:6] + snapshots[7:]
    assert len(problems) == 1 and "damaged gzip" in problems[0].message


def test_appending_to_a_cut_off_gzip_recording_keeps_new_members_readable(tmp_path, snapshots):
    path = tmp_path / "cut.jsonl.gz"
    record(path, snapshots[:4])
    path.write_bytes(path.read_bytes()[:-60])
    record(path, snapshots[4:8])
    got, problems = split(list(read_recording(path)))
    assert got == snapshots[:3] + snapshots[4:8]
    assert len(problems) == 1


def test_garbage_after_the_last_gzip_member_is_reported(tmp_path, snapshots):
    path = tmp_path / "tail.jsonl.gz"
    record(path, snapshots[:3])
    with open(path, "ab") as f:
        f.write(b"\0" * 4096)
    got, problems = split(list(read_recording(path)))
    assert got == snapshots[:3]
    assert len(problems) == 1


@pytest.mark.parametrize("compressed", [False, True])
def test_huge_line_is_skipped_without_holding_it_in_memory(tmp_path, snapshots, compressed):
    huge = b'{"schema":1,"junk":"' + b"x" * (MAX_LINE_BYTES * 3) + b'"}\n'
    lines = plain_lines(snapshots[:2]) + [huge] + plain_lines(snapshots[2:4])
    path = tmp_path / ("huge.jsonl.gz" if compressed else "huge.jsonl")
    if compressed:
        path.write_bytes(b"".join(gzip.compress(line, compresslevel=1) for line in lines))
    else:
        path.write_bytes(b"".join(lines))
    del huge, lines
    tracemalloc.start()
    try:
        got, problems = split(list(read_recording(path)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == snapshots[:4]
    assert [p.line for p in problems] == [3] and "longer than" in problems[0].message
    assert peak < MAX_LINE_BYTES * 2, "the whole 48 MiB line was held in memory"


def test_invalid_utf8_line_is_reported(tmp_path, snapshots):
    bad = json.dumps({"schema": 1, "timestamp": START, "source": "nvml", "label": "@@"}).encode()
    bad = bad.replace(b"@@", b"\xff\xfe")
    path = tmp_path / "utf8.jsonl"
    path.write_bytes(b"".join(plain_lines(snapshots[:2]) + [bad + b"\n"] + plain_lines(snapshots[2:3])))
    got, problems = split(list(read_recording(path)))
    assert got == snapshots[:3]
    assert [str(p) for p in problems] == ["line 3: not valid UTF-8"]


def test_newer_schema_and_wrong_shapes_are_reported(tmp_path, snapshots):
    newer = json.dumps({"schema": 99, "timestamp": START, "source": "nvml"}).encode() + b"\n"
    listed = b"[1, 2, 3]\n"
    shapeless = json.dumps({"schema": 1, "timestamp": START, "source": "nvml", "devices": {"0": {}}}).encode() + b"\n"
    overflowing = b'{"schema": 1, "timestamp": 1' + b"0" * 400 + b', "source": "nvml"}\n'
    path = tmp_path / "schema.jsonl"
    path.write_bytes(b"".join([newer, listed] + plain_lines(snapshots[:1]) + [b"\n", shapeless, overflowing]))
    got, problems = split(list(read_recording(path)))
    assert got == snapshots[:1]
    assert [p.line for p in problems] == [1, 2, 5, 6]
    assert "newer" in problems[0].message and "99" in problems[0].message
    source = ReplaySource(path)
    first = source.poll()
    assert first.devices == snapshots[0].devices
    assert [note.message.split(":")[0] for note in first.errors] == ["line 1", "line 2", "line 5", "line 6"]
    assert source.finished
    source.close()


def test_empty_or_unreadable_recordings_cannot_be_replayed(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(ReplayError, match="empty"):
        ReplaySource(empty)
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"hello\nworld\n")
    with pytest.raises(ReplayError, match="no readable snapshots .*line 1"):
        ReplaySource(garbage)
    with pytest.raises(ReplayError, match="cannot read recording"):
        ReplaySource(tmp_path / "missing.jsonl")


def test_unwritable_path_raises_a_one_line_recording_error(tmp_path, snapshots):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for target in (blocker / "run.jsonl", tmp_path / "no-such-dir" / "run.jsonl.gz", tmp_path):
        with pytest.raises(RecordingError) as info:
            JsonlWriter(target)
        assert isinstance(info.value, OSError)
        message = str(info.value)
        assert str(target) in message and "\n" not in message
    recorder = JsonlWriter(tmp_path / "closed.jsonl")
    recorder.close()
    with pytest.raises(RecordingError, match="closed"):
        recorder.write(snapshots[0])


CHILD = """
import itertools, sys
from gpusight.demo.source import DemoSource
from gpusight.recordings.jsonl.writer import JsonlWriter
clock = itertools.count()
source = DemoSource("mixed", seed=7, clock=lambda: 1750000000.0 + next(clock) * 0.5)
recorder = JsonlWriter(sys.argv[1])
while True:
    recorder.write(source.poll())
"""


def written_enough(path: Path) -> bool:
    """Whether the recorder has written well over five snapshots (lines of plain JSONL; 200 kB compressed)."""
    if path.suffix == ".gz":
        return path.stat().st_size > 200_000
    return path.read_bytes().count(b"\n") >= 8


@pytest.mark.parametrize("name", ["killed.jsonl", "killed.jsonl.gz"])
def test_sigkilled_recorder_leaves_every_complete_line_readable(tmp_path, name):
    path = tmp_path / name
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if path.exists() and written_enough(path):
                break
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    items = list(read_recording(path))
    got, problems = split(items)
    assert len(got) >= 5
    assert all(isinstance(i, Snapshot) for i in items[:-1]), "only the very last line may be damaged"
    assert [s.timestamp for s in got] == [got[0].timestamp + i * STEP for i in range(len(got))]
    assert len(problems) <= 1
    source = ReplaySource(path)
    assert source.recorded_interval == pytest.approx(STEP)
    source.close()
    assert os.path.getsize(path) > 0
