"""Random access into JSON-lines recordings: plain, gzip with a member per line, and gzip as one big member."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from gpusight.recordings.formats import RecordingError, RecordingProblem
from gpusight.recordings.jsonl.index import JsonlRecording
from gpusight.recordings.opening import open_seekable, read_recording
from gpusight.snapshot.model import Snapshot
from support.recordings import DAY_START, write_demo_recording

SECONDS = 1200
"""Length of the shared recording: four 300 s segments, so advice is raised and cleared."""


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("seek") / "run.jsonl"
    return write_demo_recording(path, SECONDS, scenarios=("healthy", "input-bound"), segment_s=300)


@pytest.fixture(scope="module", params=["plain", "member-per-line", "one-member"])
def recording(request: pytest.FixtureRequest, plain: Path) -> Path:
    """The same recording in each JSON-lines layout."""
    if request.param == "plain":
        return plain
    folder = plain.parent
    if request.param == "one-member":  # recompressed by another tool
        path = folder / "one.jsonl.gz"
        path.write_bytes(gzip.compress(plain.read_bytes()))
        return path
    path = folder / "lines.jsonl.gz"
    path.write_bytes(b"".join(gzip.compress(line, mtime=0) for line in plain.read_bytes().splitlines(keepends=True)))
    return path


def stamps(items) -> list[float]:
    return [item.timestamp for item in items if isinstance(item, Snapshot)]


def test_span_and_reading_from_any_time_match_the_stream(recording: Path):
    everything = [item for item in read_recording(recording)]
    times = stamps(everything)
    seekable = open_seekable(recording)
    assert isinstance(seekable, JsonlRecording)
    assert (seekable.first_timestamp, seekable.last_timestamp) == (times[0], times[-1]) == (DAY_START,
                                                                                            DAY_START + SECONDS - 1)
    assert stamps(seekable.read_from(None)) == times
    for offset in (0, 1, 299.5, 300, 777.9, SECONDS - 1):
        expected = [t for t in times if t >= DAY_START + int(offset)]  # from the last one at or before
        assert stamps(seekable.read_from(DAY_START + offset)) == expected, offset
    assert stamps(seekable.read_from(DAY_START - 50)) == times
    assert stamps(seekable.read_from(DAY_START + 10 * SECONDS)) == times[-1:]
    seekable.close()


def test_advice_events_follow_the_recorded_advice(recording: Path):
    seekable = open_seekable(recording)
    events = seekable.advice_events()
    previous: dict[str, str] = {}
    expected = []
    for snapshot in read_recording(recording):
        assert isinstance(snapshot, Snapshot)
        now = {advice.id: advice.title for advice in snapshot.advice}
        expected += [(snapshot.timestamp, advice_id, False) for advice_id in previous if advice_id not in now]
        expected += [(snapshot.timestamp, advice_id, True) for advice_id in now if advice_id not in previous]
        previous = now
    assert [(e.timestamp, e.advice_id, e.raised) for e in events] == expected
    assert any(not e.raised for e in events) and any(e.raised for e in events)
    assert {e.advice_id.split(":")[0] for e in events} == {"healthy", "input_bound"}
    assert all(e.title and e.severity for e in events)


def test_damage_after_the_start_is_reported_with_its_line(tmp_path: Path, plain: Path):
    lines = plain.read_bytes().splitlines(keepends=True)[:20]
    lines[12] = lines[12][: len(lines[12]) // 2] + b"\n"  # cut in half
    lines[15] = b"garbage\n"
    path = tmp_path / "damaged.jsonl"
    path.write_bytes(b"".join(lines))
    seekable = JsonlRecording(path)
    items = list(seekable.read_from(DAY_START + 10))
    problems = [item for item in items if isinstance(item, RecordingProblem)]
    assert [p.line for p in problems] == [13, 16]
    assert stamps(items) == [DAY_START + s for s in (10, 11, 13, 14, 16, 17, 18, 19)]
    assert [str(p) for p in problems] == [str(p) for p in read_recording(path) if isinstance(p, RecordingProblem)]


def test_damaged_gzip_members_are_skipped_and_later_ones_found(tmp_path: Path, plain: Path):
    lines = plain.read_bytes().splitlines(keepends=True)[:30]
    members = [gzip.compress(line, mtime=0) for line in lines]
    members[10] = members[10][:40] + b"\x00" * 8 + members[10][48:]  # corrupt inside the deflate data
    path = tmp_path / "damaged.jsonl.gz"
    path.write_bytes(b"".join(members))
    seekable = JsonlRecording(path)
    assert seekable.last_timestamp == DAY_START + 29
    after = stamps(seekable.read_from(DAY_START + 20))
    assert after == [DAY_START + s for s in range(20, 30)]
    before = list(seekable.read_from(DAY_START + 5))
    assert any(isinstance(item, RecordingProblem) for item in before)
    assert stamps(before)[-1] == DAY_START + 29


def test_a_file_without_snapshots_cannot_be_opened_for_seeking(tmp_path: Path):
    path = tmp_path / "junk.jsonl"
    path.write_bytes(b"garbage\n[1, 2]\n")
    with pytest.raises(RecordingError, match="no readable snapshots"):
        JsonlRecording(path)


def test_lines_in_another_key_order_are_parsed_whole(tmp_path: Path, plain: Path):
    import json

    lines = plain.read_bytes().splitlines()[:5]
    reordered = [json.dumps(dict(reversed(list(json.loads(line).items())))).encode() + b"\n" for line in lines]
    path = tmp_path / "jq.jsonl"
    path.write_bytes(b"".join(reordered))
    seekable = JsonlRecording(path)
    assert (seekable.first_timestamp, seekable.last_timestamp) == (DAY_START, DAY_START + 4)
    assert stamps(seekable.read_from(DAY_START + 3)) == [DAY_START + 3, DAY_START + 4]
