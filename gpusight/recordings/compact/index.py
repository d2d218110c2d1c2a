"""Random access to a compact recording: an index of its blocks, built from block summaries without decoding.

Opening walks the file from block to block: a block's first chunk holds the offset of the block's
summary (its time span, snapshot count and advice events), and the next block follows that summary.
A block without a summary (the last one of a killed writer) is walked chunk by chunk, reading only
the small uncompressed headers and advice events. Damage is skipped up to the next intact header.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpusight.recordings.compact.codec import CodecError
from gpusight.recordings.compact.framing import (
    BLOCK_MORE,
    BLOCK_START,
    BLOCK_SUMMARY,
    Chunk,
    FrameReader,
    NewerFormat,
    Segment,
    decode_events,
    decode_summary,
)
from gpusight.recordings.compact.layout import LayoutError
from gpusight.recordings.compact.reader import CompactStream, SegmentLayout, model_segment_layout
from gpusight.recordings.files import open_regular_file, reading
from gpusight.recordings.formats import RecordingError, RecordingProblem
from gpusight.sampling.steering import AdviceEvent
from gpusight.snapshot.model import Snapshot

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress


@dataclass(frozen=True, slots=True)
class BlockEntry:
    """One block of the index."""

    offset: int
    """Where its first chunk starts."""
    number: int
    """Its 1-based number in file order (as problems count blocks)."""
    first: float
    """Timestamp of its first snapshot."""
    last: float
    """Timestamp of its last snapshot."""
    count: int
    """Snapshots in it."""
    events: tuple[AdviceEvent, ...]
    """Advice raised and cleared in it."""
    layout: SegmentLayout
    """The layout of its segment."""


class CompactRecording:
    """A compact recording opened for random access (implements ``SeekableRecording``)."""

    def __init__(self, path: str | os.PathLike[str], progress: ReadProgress | None = None) -> None:
        """Open and index ``path``, telling ``progress`` how far the walk has got; raises ``OSError`` (a
        ``RecordingError`` with a one-line message) when unreadable."""
        self.path = os.fspath(path)
        """The file."""
        self._file = open_regular_file(self.path)
        try:
            self._frames = FrameReader(self._file)
            with reading(self._file, progress):
                self.blocks: tuple[BlockEntry, ...] = tuple(self._index(progress))
                """The blocks in file order."""
        except BaseException:
            self._file.close()
            raise
        if not self.blocks:
            self._file.close()
            raise RecordingError(f"{self.path}: no readable snapshots in this recording")
        self.first_timestamp = self.blocks[0].first
        """Timestamp of the first readable snapshot."""
        self.last_timestamp = self.blocks[-1].last
        """Timestamp of the last readable snapshot when opened."""

    def _index(self, progress: ReadProgress | None) -> Iterator[BlockEntry]:
        frames = self._frames
        offset = 0
        layout: SegmentLayout | None = None
        number = 0
        found_any = False
        while True:
            if progress is not None:
                progress.reached(offset)
            try:
                item = frames.item(offset)
                if item == "bad":
                    skip_to = frames.next_item(offset)
                    if skip_to is None:
                        return
                    offset = skip_to
                    continue
            except NewerFormat as exc:
                if not found_any:
                    raise RecordingError(f"{self.path}: {exc}") from None
                return
            if isinstance(item, str):
                return
            if isinstance(item, Segment):
                try:
                    layout = SegmentLayout.of(item)
                except LayoutError:
                    layout = None
                offset = item.end
                continue
            if item.kind != BLOCK_START:
                offset = item.end
                continue
            number += 1
            if layout is None:
                layout = self._fallback_layout(item)
            entry, offset = self._summarised(item, number, layout) or self._walked(item, number, layout)
            if entry is not None:
                found_any = True
                yield entry

    def _fallback_layout(self, start: Chunk) -> SegmentLayout | None:
        """This gpusight's layout for a block whose segment header is lost, if the block was written with it."""
        payload = self._frames.payload(start)
        if isinstance(payload, str):
            return None
        try:
            _, pos = decode_events(payload)
        except CodecError:
            return None
        fallback = model_segment_layout()
        return fallback if int.from_bytes(payload[pos : pos + 4], "little") == fallback.crc else None

    def _summarised(self, start: Chunk, number: int, layout: SegmentLayout | None) -> tuple[BlockEntry | None, int] | None:
        """The block starting with ``start`` from its summary, and where the next item starts; None without one."""
        summary_at = self._frames.slot(start)
        if summary_at is None or summary_at <= start.offset:
            return None
        summary = self._frames.item(summary_at)
        if not isinstance(summary, Chunk) or summary.kind != BLOCK_SUMMARY:
            return None
        payload = self._frames.payload(summary)
        if isinstance(payload, str):
            return None
        try:
            fields, events = decode_summary(payload)
        except CodecError:
            return None
        if fields["start"] != start.offset:
            return None
        if layout is None or not fields["count"]:
            return None, summary.end
        entry = BlockEntry(start.offset, number, float(fields["first"]), float(fields["last"]), int(fields["count"]),
                           tuple(events), layout)
        return entry, summary.end

    def _walked(self, start: Chunk, number: int, layout: SegmentLayout | None) -> tuple[BlockEntry | None, int]:
        """The block starting with ``start`` from its chunks' headers and advice events, and where it ends."""
        chunk: Chunk = start
        first, last, count = start.first, start.last, 0
        events: list[AdviceEvent] = []
        end = start.end
        while True:
            payload = self._frames.payload(chunk)
            if isinstance(payload, str):
                break
            try:
                found, _ = decode_events(payload)
            except CodecError:
                break
            events += found
            count += chunk.count
            last = chunk.last
            end = chunk.end
            following = self._frames.item(end)
            if not isinstance(following, Chunk) or following.kind != BLOCK_MORE:
                break
            chunk = following
        if layout is None or not count:
            return None, end
        return BlockEntry(start.offset, number, first, last, count, tuple(events), layout), end

    def read_from(self, timestamp: float | None = None) -> Iterator[Snapshot | RecordingProblem]:
        """See ``SeekableRecording.read_from``."""
        chosen = self.blocks[0]
        if timestamp is not None:
            for block in self.blocks:
                if block.first <= timestamp:
                    chosen = block
        start = None if timestamp is None or timestamp <= chosen.first else timestamp
        stream = CompactStream(FrameReader(self._file), chosen.layout, chosen.number - 1, start)
        return stream.run(chosen.offset)

    def advice_events(self) -> Sequence[AdviceEvent]:
        """See ``SeekableRecording.advice_events``."""
        events = [event for block in self.blocks for event in block.events]
        events.sort(key=lambda event: event.timestamp)
        return events

    def close(self) -> None:
        """Release the file."""
        self._file.close()
