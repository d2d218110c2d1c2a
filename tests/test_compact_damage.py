"""Damaged, cut and appended compact recordings: every intact block still plays, problems are reported, nothing raises."""

import os
import struct

import pytest

from gpusight.recordings.compact import CompactRecording, CompactWriter, read_compact
from gpusight.recordings.compact.framing import CHUNK_MAGIC, FORMAT_VERSION
from gpusight.recordings.formats import COMPACT_MAGIC, RecordingError, RecordingProblem
from gpusight.recordings.opening import open_recorder, open_seekable, read_recording
from gpusight.snapshot.model import DeviceSample, ProcessSample, Snapshot, SourceKind

START = 1_750_000_000.0


def snapshots(count, start=START):
    return [
        Snapshot(start + i, SourceKind.DEMO, devices=(DeviceSample(0, power_watts=100.0 + i % 7, utilization_gpu_percent=float(i % 100)),),
                 processes=(ProcessSample(10 + i // 10, cmdline=f"train --seed {i // 10}", cpu_percent=i * 0.1),))
        for i in range(count)
    ]


def write(path, items, block=None, monkeypatch=None):
    if block is not None:
        monkeypatch.setattr("gpusight.recordings.compact.writer.BLOCK_SNAPSHOTS", block)
    writer = CompactWriter(path)
    for snapshot in items:
        writer.write(snapshot)
    writer.close()


def split(items):
    items = list(items)
    return [i for i in items if isinstance(i, Snapshot)], [i for i in items if isinstance(i, RecordingProblem)]


@pytest.fixture
def small(tmp_path, monkeypatch):
    path = tmp_path / "small.gtr"
    data = snapshots(30)
    write(path, data, block=8, monkeypatch=monkeypatch)
    return path, data


def test_a_file_cut_anywhere_replays_a_prefix(small, tmp_path):
    path, data = small
    whole = path.read_bytes()
    cut = tmp_path / "cut.gtr"
    for size in range(len(COMPACT_MAGIC), len(whole)):
        cut.write_bytes(whole[:size])
        got, problems = split(read_recording(cut))
        assert got == data[: len(got)], size
        if size < len(whole):
            assert problems, size
            assert all(p.unit == "block" for p in problems)
            assert "interrupted" in problems[-1].message, (size, problems)
    got, problems = split(read_recording(path))
    assert got == data and problems == []


def test_flipped_bytes_lose_one_block_and_later_blocks_play(small, tmp_path):
    path, data = small
    whole = bytearray(path.read_bytes())
    starts = [i for i in range(len(whole)) if whole[i : i + 4] == CHUNK_MAGIC]
    block_starts = [i for i in starts if whole[i + 4] == 1]
    damaged = tmp_path / "damaged.gtr"
    for at in range(starts[0], len(whole), 7):
        copy = bytearray(whole)
        copy[at] ^= 0x5A
        damaged.write_bytes(copy)
        got, problems = split(read_recording(damaged))
        assert problems or got == data, at
        assert len(got) >= len(data) - 16, at  # at most the damaged block (8) and a neighbour's keyframe
        assert all(s in data for s in got)
        assert [s.timestamp for s in got] == sorted(s.timestamp for s in got)
        assert got[-1] == data[-1] or at >= block_starts[-1]
    for p in problems:
        assert str(p).startswith("block ")


@pytest.mark.parametrize("where", ["segment header", "blocks"])
def test_zeroed_range_is_skipped_with_a_message(small, tmp_path, where):
    path, data = small
    whole = bytearray(path.read_bytes())
    header_end = whole.find(CHUNK_MAGIC)
    middle = header_end // 2 if where == "segment header" else (header_end + len(whole)) // 2
    whole[middle : middle + 100] = bytes(100)
    damaged = tmp_path / "zeroed.gtr"
    damaged.write_bytes(whole)
    got, problems = split(read_recording(damaged))
    assert problems and all("skipped" in p.message for p in problems)
    assert got[0] == data[0] and got[-1] == data[-1]
    recording = CompactRecording(damaged)
    try:
        assert recording.last_timestamp == data[-1].timestamp
        assert list(recording.read_from(data[-1].timestamp)) == [data[-1]]
    finally:
        recording.close()


def test_a_gigantic_length_field_allocates_nothing(small, tmp_path):
    path, data = small
    whole = bytearray(path.read_bytes())
    at = whole.find(CHUNK_MAGIC)
    whole[at + 5 : at + 9] = struct.pack("<I", 0xFFFFFFF0)  # the payload length (header checksum now fails)
    damaged = tmp_path / "huge.gtr"
    damaged.write_bytes(whole)
    got, problems = split(read_recording(damaged))
    assert problems and got[-1] == data[-1]


def test_a_checksummed_header_with_a_gigantic_length_allocates_nothing(small, tmp_path):
    import tracemalloc
    import zlib

    from gpusight.recordings.compact.framing import CHUNK_HEADER

    path, data = small
    whole = bytearray(path.read_bytes())
    at = whole.find(CHUNK_MAGIC)
    fields = list(CHUNK_HEADER.unpack_from(whole, at))
    for size in (0xFFFFFFFF, 60 * 1024 * 1024):  # beyond the limit, and within it but beyond the end of the file
        fields[2] = size
        CHUNK_HEADER.pack_into(whole, at, *fields)
        struct.pack_into("<I", whole, at + CHUNK_HEADER.size, zlib.crc32(whole[at : at + CHUNK_HEADER.size]))
        damaged = tmp_path / "huge.gtr"
        damaged.write_bytes(whole)
        tracemalloc.start()
        try:
            got, problems = split(read_recording(damaged))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert problems and got[-1] == data[-1]
        assert peak < 8 * 1024 * 1024


def test_a_newer_format_version_is_refused_with_one_line(small, tmp_path):
    path, _ = small
    whole = bytearray(path.read_bytes())
    # a newer writer: version field raised, checksum made right again
    import zlib
    size = struct.unpack_from("<I", whole, len(COMPACT_MAGIC) + 2)[0]
    struct.pack_into("<H", whole, len(COMPACT_MAGIC), FORMAT_VERSION + 1)
    body = bytes(whole[len(COMPACT_MAGIC) : len(COMPACT_MAGIC) + 6 + size])
    struct.pack_into("<I", whole, len(COMPACT_MAGIC) + 6 + size, zlib.crc32(body))
    newer = tmp_path / "newer.gtr"
    newer.write_bytes(whole)
    got, problems = split(read_recording(newer))
    assert got == [] and len(problems) == 1
    assert "newer" in problems[0].message and "\n" not in problems[0].message
    with pytest.raises(RecordingError, match="format version 2 is newer"):
        open_seekable(newer)
    with pytest.raises(RecordingError, match="newer gpusight"):
        CompactWriter(newer)
    assert newer.read_bytes() == whole


def test_appending_after_a_cut_keeps_old_and_new_snapshots(small, tmp_path):
    path, data = small
    whole = path.read_bytes()
    cut = tmp_path / "appended.gtr"
    first_block = next(size for size in range(len(COMPACT_MAGIC), len(whole), 64)
                       if cut.write_bytes(whole[:size]) and split(read_recording(cut))[0])
    cut.write_bytes(whole[: (first_block + len(whole)) // 2])  # a cut in the middle of the snapshots, past the header
    before, _ = split(read_recording(cut))
    assert 0 < len(before) < len(data)
    later = snapshots(20, start=START + 1000)
    write(cut, later)
    got, problems = split(read_recording(cut))
    assert got == before + later
    assert 1 <= len(problems) <= 2 and "interrupted" in problems[-1].message  # the cut part, then the end of its segment
    recording = open_seekable(cut)
    try:
        assert recording.first_timestamp == START and recording.last_timestamp == later[-1].timestamp
        assert list(recording.read_from(START + 1005)) == later[5:]
    finally:
        recording.close()


def test_appending_to_a_closed_recording_adds_a_segment(small):
    path, data = small
    later = snapshots(5, start=START + 100)
    write(path, later)
    got, problems = split(read_recording(path))
    assert got == data + later and problems == []


def test_an_existing_jsonl_file_is_not_clobbered(tmp_path):
    path = tmp_path / "old-recording"
    path.write_text('{"schema": 3}\n')
    with pytest.raises(RecordingError) as caught:
        open_recorder(path)
    assert "--convert" in str(caught.value) and "\n" not in str(caught.value)
    assert path.read_text() == '{"schema": 3}\n'


def test_write_after_close_and_unwritable_paths_raise_recording_errors(tmp_path):
    writer = CompactWriter(tmp_path / "c.gtr")
    writer.close()
    with pytest.raises(RecordingError, match="closed"):
        writer.write(snapshots(1)[0])
    with pytest.raises(RecordingError, match="cannot write"):
        CompactWriter(tmp_path / "missing-dir" / "x.gtr")


def test_write_failure_raises_os_error(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with pytest.raises(OSError):
        writer = CompactWriter("/dev/full")
        writer.write(snapshots(1)[0])


def test_reading_garbage_never_raises(tmp_path):
    garbage = tmp_path / "garbage.gtr"
    garbage.write_bytes(COMPACT_MAGIC + os.urandom(5000) + CHUNK_MAGIC + os.urandom(300))
    with open(garbage, "rb") as file:
        got, problems = split(read_compact(file))
    assert got == [] and problems


def test_a_segment_naming_another_codec_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr("gpusight.recordings.compact.writer.CODEC", "zlib")
    path = tmp_path / "zlib.gtr"
    write(path, snapshots(5))
    got, problems = split(read_recording(path))
    assert problems and "'zlib'" in problems[0].message, problems
