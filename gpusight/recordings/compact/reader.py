"""Streams the snapshots of a compact recording, reporting damaged or cut-off blocks as problems and going on.

A chunk whose header or payload checksum fails loses the rest of its block (the compressor's state
is gone); reading picks up at the next intact block or segment header found after it. The file is
read one chunk at a time, so memory stays bounded whatever its size.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, BinaryIO

import zstandard

from gpusight.recordings.compact.codec import CodecError, get_varint
from gpusight.recordings.compact.compression import CODEC, BlockDecompressor
from gpusight.recordings.compact.decoder import SnapshotDecoder
from gpusight.recordings.compact.framing import (
    BLOCK_START,
    BLOCK_SUMMARY,
    MAX_RECORD,
    SEGMENT_END,
    Chunk,
    FrameReader,
    NewerFormat,
    Segment,
    decode_events,
)
from gpusight.recordings.compact.layout import LayoutError, Table, layout_crc, layout_from_header, model_layout
from gpusight.recordings.formats import RecordingProblem
from gpusight.snapshot.model import Snapshot
from gpusight.snapshot.serialize import SnapshotFormatError

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress

INTERRUPTED = "recording interrupted: the writer stopped without closing the file (its last second may be missing)"
"""The problem reported for a block that a killed writer left without its summary."""

_DECODE_ERRORS = (CodecError, zstandard.ZstdError, SnapshotFormatError, TypeError, ValueError, KeyError, IndexError,
                  OverflowError, RecursionError)


def read_compact(file: BinaryIO, progress: ReadProgress | None = None, *,
                 gpu_processes_only: bool = False) -> Iterator[Snapshot | RecordingProblem]:
    """Stream the snapshots of an open compact recording from its start, with a problem for each damaged block.

    ``progress`` is told the offset reached before each chunk (never begun nor ended here). With
    ``gpu_processes_only``, snapshots list only the processes with a GPU context (see :class:`SnapshotDecoder`).
    """
    return CompactStream(FrameReader(file), progress=progress, gpu_processes_only=gpu_processes_only).run(0)


class SegmentLayout:
    """A segment's layout and its checksum (which each block of the segment carries)."""

    def __init__(self, tables: tuple[Table, ...], crc: int) -> None:
        self.tables = tables
        """The tables."""
        self.crc = crc
        """The layout's checksum."""

    @classmethod
    def of(cls, segment: Segment) -> SegmentLayout:
        """The layout ``segment``'s header describes; raises :class:`LayoutError` when this gpusight cannot decode it."""
        described = segment.description
        if described.get("codec") != CODEC:
            raise LayoutError(f"compressed with {described.get('codec')!r}, which this gpusight does not read")
        crc = described.get("layout_crc")
        if not isinstance(crc, int):
            raise LayoutError("layout checksum missing")
        return cls(layout_from_header(described.get("layout")), crc)


def model_segment_layout() -> SegmentLayout:
    """The layout this gpusight writes: blocks whose checksum matches it decode even when their segment header is lost."""
    tables = model_layout()
    return SegmentLayout(tables, layout_crc(tables))


class CompactStream:
    """One pass over a compact recording from an offset (the file's start or a block's first chunk)."""

    def __init__(self, frames: FrameReader, layout: SegmentLayout | None = None, block_number: int = 0,
                 start_time: float | None = None, progress: ReadProgress | None = None,
                 gpu_processes_only: bool = False) -> None:
        self.frames = frames
        """The file."""
        self.layout = layout
        """The current segment's layout (None until a readable segment header)."""
        self.blocks = block_number
        """Blocks started so far (block numbers in problems are 1-based, in file order)."""
        self.start_time = start_time
        """When set, the first snapshot yielded is the last one at or before it (see ``read_from``)."""
        self.progress = progress
        """Told the file offset reached before each item is read; None when nobody watches."""
        self.gpu_processes_only = gpu_processes_only
        """True when snapshots list only the processes with a GPU context."""
        self._decoder: SnapshotDecoder | None = None
        self._decompressor: BlockDecompressor | None = None
        self._open = False  # the segment being read has not been closed by its writer (yet)
        self._seek_candidate = False  # while seeking: the decoder holds a snapshot at or before start_time

    def _problem(self, message: str, number: int | None = None) -> RecordingProblem:
        return RecordingProblem(max(1, self.blocks if number is None else number), message, unit="block")

    def run(self, offset: int) -> Iterator[Snapshot | RecordingProblem]:
        """Snapshots and problems from ``offset`` to the end of the file; never raises on bad data."""
        self._open = offset > 0  # from a block: inside a segment whose header was read by the index
        try:
            yield from self._run(offset)
        except OSError as exc:
            yield self._problem(f"read error, rest of the recording skipped: {exc.strerror or exc}")

    def _run(self, offset: int) -> Iterator[Snapshot | RecordingProblem]:
        progress = self.progress
        while True:
            if progress is not None:
                progress.reached(offset)
            try:
                item = self.frames.item(offset)
            except NewerFormat as exc:
                yield from self._end_block(interrupted=False)
                yield self._problem(str(exc), self.blocks + 1)
                return
            if item == "end" or item == "cut":
                yield from self._end_block(interrupted=self._open or item == "cut")
                return
            if isinstance(item, str):
                yield from self._end_block(interrupted=False)
                found = self._resync(offset)
                yield self._problem("damaged data skipped up to the next intact block", self.blocks + 1)
                if found is None:
                    return
                offset = found
                continue
            if isinstance(item, Segment):
                yield from self._end_block(interrupted=self._open)
                self._open = True
                try:
                    self.layout = SegmentLayout.of(item)
                except LayoutError as exc:
                    self.layout = None
                    yield self._problem(f"segment header not understood ({exc}): its blocks are skipped", self.blocks + 1)
                offset = item.end
                continue
            offset = yield from self._chunk(item)

    def _resync(self, offset: int) -> int | None:
        try:
            return self.frames.next_item(offset)
        except NewerFormat:
            return None

    def _chunk(self, chunk: Chunk) -> Generator[Snapshot | RecordingProblem, None, int]:
        """Decode one chunk; returns where to go on."""
        if chunk.kind in (BLOCK_SUMMARY, SEGMENT_END):
            yield from self._end_block(interrupted=False)
            self._open = chunk.kind != SEGMENT_END and self._open
            return chunk.end
        if chunk.kind == BLOCK_START:
            yield from self._end_block(interrupted=False)
            self.blocks += 1
        elif self._decoder is None:
            return chunk.end  # the rest of a block whose start is damaged or missing (already reported)
        payload = self.frames.payload(chunk)
        if payload == "cut":  # the file ends inside it, or its length is damage: look for more all the same
            yield from self._end_block(interrupted=True)
            found = self._resync(chunk.offset)
            return chunk.end if found is None else found
        if isinstance(payload, str):
            self._decoder = None
            yield self._problem("damaged (checksum mismatch): the rest of the block is skipped")
            found = self._resync(chunk.offset)
            return chunk.end if found is None else found
        try:
            _, pos = decode_events(payload)
            if chunk.kind == BLOCK_START:
                pos = self._start_block(payload, pos)
            assert self._decompressor is not None
            data = self._decompressor.inflate(payload[pos:], MAX_RECORD)
        except _DECODE_ERRORS as exc:
            self._decoder = None
            yield self._problem(f"not decodable ({exc}): the rest of the block is skipped")
            return chunk.end
        yield from self._records(data, chunk.count)
        return chunk.end

    def _start_block(self, payload: bytes, pos: int) -> int:
        crc = int.from_bytes(payload[pos : pos + 4], "little")
        if self.layout is None or crc != self.layout.crc:
            fallback = model_segment_layout()
            if crc != fallback.crc:
                raise CodecError("its segment header is lost and it was written with another layout")
            self.layout = fallback
        self._decoder = SnapshotDecoder(self.layout.tables, self.gpu_processes_only)
        self._decompressor = BlockDecompressor()
        self._seek_candidate = False
        return pos + 4

    def _records(self, data: bytes, count: int) -> Iterator[Snapshot | RecordingProblem]:
        decoder = self._decoder
        assert decoder is not None
        pos = 0
        found = 0
        try:
            while pos < len(data):
                size, pos = get_varint(data, pos)
                record = data[pos : pos + size]
                if len(record) < size:
                    raise CodecError("record cut short")
                pos += size
                found += 1
                if self.start_time is not None:
                    if self._seek_candidate:
                        upcoming = decoder.peek_timestamp(record)
                        if upcoming is not None and upcoming > self.start_time:
                            self.start_time = None
                            yield decoder.build()
                    decoder.apply(record)
                    self._seek_candidate = True
                    if self.start_time is not None:
                        continue
                else:
                    decoder.apply(record)
                yield decoder.build()
            if found != count:
                raise CodecError(f"{found} snapshots where the header says {count}")
        except _DECODE_ERRORS as exc:
            self._decoder = None
            yield self._problem(f"not decodable ({exc}): the rest of the block is skipped")

    def _end_block(self, interrupted: bool) -> Iterator[Snapshot | RecordingProblem]:
        """Leave the current block: while seeking, its last snapshot is the one asked for."""
        if self._decoder is not None and self.start_time is not None and self._seek_candidate:
            self.start_time = None
            try:
                yield self._decoder.build()
            except _DECODE_ERRORS as exc:
                yield self._problem(f"not decodable ({exc})")
        if interrupted:
            yield self._problem(INTERRUPTED)
            self._open = False
        self._decoder = None
        self._seek_candidate = False
