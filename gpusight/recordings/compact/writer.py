"""Writes compact recordings: records compressed with Zstandard in blocks, flushed about every second, synced by a thread.

Each ``write`` codes the snapshot (:mod:`gpusight.recordings.compact.encoder`) and feeds it to the block's
compressor. The pending compressed bytes go out as a chunk (a block flush) once ``FLUSH_SECONDS`` of
wall time or of snapshot time have passed since the last chunk, so a killed process loses at most
about a second. A thread calls ``fdatasync`` after each chunk, so a power cut loses about as little
and the sampler never waits for the disk. A block ends after ``BLOCK_SECONDS`` of snapshot time or
``BLOCK_SNAPSHOTS`` snapshots: its summary chunk is written and its first chunk's summary slot is
filled in, and the next snapshot starts a new block with a fresh compressor and a keyframe.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any

import gpusight
from gpusight.recordings.compact.codec import put_varint
from gpusight.recordings.compact.compression import CODEC, BlockCompressor, new_compressor
from gpusight.recordings.compact.encoder import SnapshotEncoder
from gpusight.recordings.compact.framing import (
    BLOCK_MORE,
    BLOCK_START,
    BLOCK_SUMMARY,
    FORMAT_VERSION,
    HEADER_SIZE,
    SEGMENT_END,
    SEGMENT_PREFIX,
    chunk_header,
    encode_events,
    encode_summary,
    segment_header,
    summary_slot,
)
from gpusight.recordings.compact.layout import Table, layout_crc, model_layout
from gpusight.recordings.formats import COMPACT_MAGIC, RecordingError, StandingAdvice, advice_changes, may_be_compact_magic
from gpusight.sampling.steering import AdviceEvent
from gpusight.snapshot.model import SCHEMA_VERSION, Snapshot

FLUSH_SECONDS = 0.75
"""A chunk is written once this much wall time or snapshot time passed since the last one."""

BLOCK_SECONDS = 300.0
"""Snapshot time after which a block ends (a restart point every 5 minutes)."""

BLOCK_SNAPSHOTS = 600
"""Snapshots after which a block ends, whatever their times (bounds the work of a seek)."""

CHUNK_SNAPSHOTS = 1000
"""Snapshots after which a chunk is written, whatever the time (the header holds a 16-bit count)."""

CHUNK_BYTES = 4 * 1024 * 1024
"""Uncompressed record bytes after which a chunk is written."""


def segment_description(tables: tuple[Table, ...]) -> dict[str, Any]:
    """What a segment header says about the segment."""
    return {
        "format": "gpusight compact recording", "format_version": FORMAT_VERSION, "schema": SCHEMA_VERSION,
        "writer": f"gpusight {gpusight.__version__}", "created": time.time(), "codec": CODEC,
        "layout": [t.describe() for t in tables], "layout_crc": layout_crc(tables),
    }


class _Syncer:
    """A thread that calls ``fdatasync`` on a file after each chunk, so the sampler never waits for the disk."""

    def __init__(self, fd: int, path: str) -> None:
        self._fd = fd
        self._path = path
        self._wanted = threading.Event()
        self._stop = False
        self.error: OSError | None = None
        """The first failure, raised by the writer's next ``write``."""
        self._thread = threading.Thread(target=self._run, name="gpusight-recording-sync", daemon=True)
        self._thread.start()

    def request(self) -> None:
        """Sync soon."""
        self._wanted.set()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._stop:
                return
            try:
                os.fdatasync(self._fd)
            except OSError as exc:
                self.error = self.error or exc

    def stop(self) -> None:
        """End the thread (after the sync it is doing)."""
        self._stop = True
        self._wanted.set()
        self._thread.join()


class CompactWriter:
    """Appends snapshots to a compact recording (a :class:`gpusight.sampling.sampler.SnapshotWriter`).

    An existing compact file gets a new segment after whatever it holds (a cut-off end included); an
    existing file in another format is refused with a :class:`RecordingError`, never overwritten.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        """Where the recording goes."""
        self._tables = model_layout()
        self._encoder = SnapshotEncoder(self._tables)
        self._layout_crc = layout_crc(self._tables)
        try:
            self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise RecordingError(f"cannot write recording {self.path}: {exc.strerror or exc}") from exc
        try:
            self._offset = self._check_existing()
            self._write(segment_header(segment_description(self._tables)))
        except OSError as exc:
            os.close(self._fd)
            self._fd = None
            if isinstance(exc, RecordingError):
                raise
            raise RecordingError(f"cannot write recording {self.path}: {exc.strerror or exc}") from exc
        self._syncer = _Syncer(self._fd, self.path)
        self._advice: StandingAdvice = {}
        self._compressor: BlockCompressor | None = None
        self._zstd = new_compressor()
        self._block_start = 0
        self._block_first = self._block_last = 0.0
        self._block_count = 0
        self._block_events: list[AdviceEvent] = []
        self._pending = bytearray()
        self._pending_records = 0
        self._pending_first = self._pending_last = 0.0
        self._pending_events: list[AdviceEvent] = []
        self._chunk_kind = BLOCK_START
        self._flushed_at = -math.inf
        self._flushed_time = -math.inf

    def _check_existing(self) -> int:
        """The end of what the file holds; raises :class:`RecordingError` when it is not a compact recording."""
        assert self._fd is not None
        size = os.lseek(self._fd, 0, os.SEEK_END)
        if size:
            head = os.pread(self._fd, SEGMENT_PREFIX, 0)
            if not may_be_compact_magic(head):
                raise RecordingError(
                    f"{self.path} exists and is not a compact recording (JSON lines?): not overwritten; "
                    f"record to a new name, append with a .jsonl name, or convert it with gpusight --convert")
            version = int.from_bytes(head[len(COMPACT_MAGIC) : len(COMPACT_MAGIC) + 2], "little")
            if len(head) == SEGMENT_PREFIX and version > FORMAT_VERSION:
                raise RecordingError(f"{self.path} was written by a newer gpusight (format version {version}): "
                                     f"not appended to; record to a new name")
        return size

    def write(self, snapshot: Snapshot) -> None:
        """Store one snapshot (flushed to the OS within about a second; raises OSError on a write failure)."""
        if self._fd is None:
            raise RecordingError(f"recording {self.path} is closed")
        try:
            self._write_snapshot(snapshot)
        except OSError:
            self._abandon()
            raise

    def _write_snapshot(self, snapshot: Snapshot) -> None:
        if self._syncer.error is not None:
            raise RecordingError(f"cannot write recording {self.path}: {self._syncer.error.strerror or self._syncer.error}")
        timestamp = snapshot.timestamp
        if self._compressor is not None and (
            self._block_count >= BLOCK_SNAPSHOTS or not 0 <= timestamp - self._block_first < BLOCK_SECONDS
        ):
            self._end_block()
        if self._compressor is None:
            self._start_block(timestamp)
        record = self._encoder.encode(snapshot)
        framed = bytearray()
        put_varint(framed, len(record))
        framed += record
        assert self._compressor is not None
        self._pending += self._compressor.compress(bytes(framed))
        if not self._pending_records:
            self._pending_first = timestamp
        self._pending_records += 1
        self._pending_last = timestamp
        self._block_count += 1
        self._block_last = timestamp
        events = self._advice_events(snapshot)
        self._pending_events += events
        self._block_events += events
        now = time.monotonic()
        if (now - self._flushed_at >= FLUSH_SECONDS or timestamp - self._flushed_time >= FLUSH_SECONDS
                or self._pending_records >= CHUNK_SNAPSHOTS or len(self._pending) >= CHUNK_BYTES):
            self._flush(now)

    def _advice_events(self, snapshot: Snapshot) -> list[AdviceEvent]:
        current = {a.id: (a.severity, a.title) for a in snapshot.advice}
        events = advice_changes(snapshot.timestamp, self._advice, current)
        self._advice = current
        return events

    def _start_block(self, timestamp: float) -> None:
        self._encoder.restart()
        self._compressor = BlockCompressor(self._zstd)
        self._block_start = self._offset
        self._block_first = self._block_last = timestamp
        self._block_count = 0
        self._block_events = []
        self._chunk_kind = BLOCK_START
        self._pending += self._layout_crc.to_bytes(4, "little")

    def _flush(self, now: float) -> None:
        """Write the pending records as a chunk."""
        if not self._pending_records:
            return
        assert self._compressor is not None
        self._pending += self._compressor.flush()
        payload = encode_events(self._pending_events) + self._pending
        header = chunk_header(self._chunk_kind, payload, self._pending_records, self._pending_first, self._pending_last)
        self._write(header + payload)
        self._chunk_kind = BLOCK_MORE
        self._pending = bytearray()
        self._pending_records = 0
        self._pending_events = []
        self._flushed_at = now
        self._flushed_time = self._pending_last
        self._syncer.request()

    def _end_block(self) -> None:
        """Write what is pending, the block's summary, and fill in the block's summary slot."""
        self._flush(time.monotonic())
        summary_at = self._offset
        payload = encode_summary(self._block_start, self._block_first, self._block_last, self._block_count,
                                 self._block_events)
        self._write(chunk_header(BLOCK_SUMMARY, payload, self._block_count, self._block_first, self._block_last) + payload)
        assert self._fd is not None
        try:
            os.pwrite(self._fd, summary_slot(summary_at), self._block_start + HEADER_SIZE)
        except OSError as exc:
            raise RecordingError(f"cannot write recording {self.path}: {exc.strerror or exc}") from exc
        self._compressor = None

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        try:
            while view:
                written = os.pwrite(self._fd, view, self._offset)
                self._offset += written
                view = view[written:]
        except OSError as exc:
            raise RecordingError(f"cannot write recording {self.path}: {exc.strerror or exc}") from exc

    def _abandon(self) -> None:
        """After a write failure: release the file and the sync thread without writing more (later writes raise)."""
        fd, self._fd = self._fd, None
        self._syncer.stop()
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        """Flush everything, end the block, sync and close the file; later writes raise."""
        if self._fd is None:
            return
        fd = self._fd
        try:
            if self._compressor is not None:
                self._end_block()
            self._write(chunk_header(SEGMENT_END, b"", 0, self._block_last, self._block_last))
        finally:
            self._syncer.stop()
            self._fd = None
            try:
                os.fdatasync(fd)
            except OSError:
                pass
            os.close(fd)
