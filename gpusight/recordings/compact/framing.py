"""The framing of a compact recording: segment headers and checksummed chunks, and finding them again after damage.

A file is one or more *segments* (one per ``--record`` run that wrote to it). A segment starts with
a header: ``COMPACT_MAGIC``, the format version (u16), the length of a JSON description (u32), the
JSON and a CRC-32 of the version, length and JSON. Chunks follow. A chunk is a fixed header
(``CHUNK_HEADER``: magic, kind, payload length, snapshot count, first and last timestamp, payload
CRC-32, header CRC-32), for a block's first chunk a 12-byte *summary slot*, then the payload. All
integers are little-endian. See ``docs/recording.md``.
"""

from __future__ import annotations

import io
import json
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Any, BinaryIO

from gpusight.recordings.compact.codec import CodecError, get_varint, put_varint
from gpusight.recordings.formats import COMPACT_MAGIC, COMPACT_MAGICS, is_compact_magic, may_be_compact_magic
from gpusight.sampling.steering import AdviceEvent
from gpusight.snapshot.model import Severity

FORMAT_VERSION = 1
"""Version of the compact format this gpusight writes and the newest it reads."""

CHUNK_MAGIC = b"\xd7GCK"
"""The first bytes of every chunk."""

CHUNK_HEADER = struct.Struct("<4sBIHdd I")
"""Magic, kind, payload length, snapshot count, first and last timestamp, payload CRC-32; its CRC-32 follows."""

_CRC = struct.Struct("<I")
HEADER_SIZE = CHUNK_HEADER.size + _CRC.size
"""Bytes of a chunk header, its checksum included."""

SLOT = struct.Struct("<QI")
"""A block's summary slot: the offset of the block's summary chunk and the CRC-32 of those 8 bytes.

Written as zeros (an invalid slot) with the block's first chunk, and filled in when the block ends."""

_SEGMENT = struct.Struct("<HI")
SEGMENT_PREFIX = len(COMPACT_MAGIC) + _SEGMENT.size
"""Bytes of a segment header before its JSON."""

BLOCK_START = 1
"""Chunk kind: the first chunk of a block (a fresh compressor and a keyframe), followed by a summary slot."""
BLOCK_MORE = 2
"""Chunk kind: a further chunk of the block before it."""
BLOCK_SUMMARY = 3
"""Chunk kind: a block's summary (JSON: where it starts, its time span, snapshot count and advice events)."""

SEGMENT_END = 4
"""Chunk kind: the writer closed the segment (an empty payload); without it the segment was interrupted."""

MAX_PAYLOAD = 64 * 1024 * 1024
"""Largest chunk payload accepted; a larger length is damage, never an allocation."""
MAX_SEGMENT_JSON = 1024 * 1024
"""Largest segment description accepted."""
MAX_RECORD = 256 * 1024 * 1024
"""Largest decompressed chunk accepted (a bound on damage that passed the checksum)."""


@dataclass(frozen=True, slots=True)
class Segment:
    """A segment header read from a file."""

    offset: int
    """Where it starts."""
    end: int
    """Where its first chunk starts."""
    version: int
    """Its format version."""
    description: dict[str, Any]
    """Its JSON description (schema version, writer, layout, ...)."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """A chunk header read from a file (its payload not yet read)."""

    offset: int
    """Where it starts."""
    kind: int
    """``BLOCK_START``, ``BLOCK_MORE``, ``BLOCK_SUMMARY`` or ``SEGMENT_END``."""
    size: int
    """Payload length."""
    count: int
    """Snapshots in it."""
    first: float
    """Timestamp of its first snapshot."""
    last: float
    """Timestamp of its last snapshot."""
    crc: int
    """CRC-32 of the payload."""

    @property
    def payload_offset(self) -> int:
        """Where the payload starts."""
        return self.offset + HEADER_SIZE + (SLOT.size if self.kind == BLOCK_START else 0)

    @property
    def end(self) -> int:
        """Where the next item starts."""
        return self.payload_offset + self.size


def segment_header(description: dict[str, Any]) -> bytes:
    """The bytes of a segment header with ``description``."""
    text = json.dumps(description, separators=(",", ":"), sort_keys=True).encode("ascii")
    fixed = _SEGMENT.pack(FORMAT_VERSION, len(text))
    return COMPACT_MAGIC + fixed + text + _CRC.pack(zlib.crc32(fixed + text))


def chunk_header(kind: int, payload: bytes, count: int, first: float, last: float) -> bytes:
    """The header of a chunk (and the empty summary slot of a block's first chunk)."""
    head = CHUNK_HEADER.pack(CHUNK_MAGIC, kind, len(payload), count, first, last, zlib.crc32(payload))
    slot = bytes(SLOT.size) if kind == BLOCK_START else b""
    return head + _CRC.pack(zlib.crc32(head)) + slot


def summary_slot(summary_offset: int) -> bytes:
    """A filled-in summary slot pointing at ``summary_offset``."""
    offset = SLOT.pack(summary_offset, 0)[:8]
    return offset + _CRC.pack(zlib.crc32(offset))


class NewerFormat(CodecError):
    """A segment written in a format version newer than this gpusight reads."""


def parse_segment(data: bytes, offset: int) -> Segment | int | None:
    """The segment header at the start of ``data``: a :class:`Segment`, the bytes still needed, or None if invalid.

    Raises :class:`NewerFormat` for an intact header of a newer format version.
    """
    if len(data) < SEGMENT_PREFIX:
        return SEGMENT_PREFIX
    if not is_compact_magic(data):
        return None
    version: int
    size: int
    version, size = _SEGMENT.unpack_from(data, len(COMPACT_MAGIC))
    if size > MAX_SEGMENT_JSON:
        return None
    total = SEGMENT_PREFIX + size + _CRC.size
    if len(data) < total:
        return total
    fixed_and_text = data[len(COMPACT_MAGIC) : SEGMENT_PREFIX + size]
    if _CRC.unpack_from(data, SEGMENT_PREFIX + size)[0] != zlib.crc32(fixed_and_text):
        return None
    if version > FORMAT_VERSION:
        raise NewerFormat(f"compact recording format version {version} is newer than this gpusight reads "
                          f"({FORMAT_VERSION}): upgrade gpusight to replay it")
    try:
        description: Any = json.loads(data[SEGMENT_PREFIX : SEGMENT_PREFIX + size].decode("ascii"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(description, dict):
        return None
    return Segment(offset, offset + total, version, description)


def parse_chunk(data: bytes, offset: int) -> Chunk | None:
    """The chunk header at the start of ``data`` (at least ``HEADER_SIZE`` bytes), or None if it is not one."""
    if len(data) < HEADER_SIZE or not data.startswith(CHUNK_MAGIC):
        return None
    if _CRC.unpack_from(data, CHUNK_HEADER.size)[0] != zlib.crc32(data[: CHUNK_HEADER.size]):
        return None
    _, kind, size, count, first, last, crc = CHUNK_HEADER.unpack_from(data)
    if kind not in (BLOCK_START, BLOCK_MORE, BLOCK_SUMMARY, SEGMENT_END) or size > MAX_PAYLOAD:
        return None
    return Chunk(offset, kind, size, count, first, last, crc)


def parse_slot(data: bytes) -> int | None:
    """The summary offset in a block's summary slot, or None while it is not filled in (or damaged)."""
    if len(data) < SLOT.size:
        return None
    offset, crc = SLOT.unpack_from(data)
    return offset if crc == zlib.crc32(data[:8]) else None


class FrameReader:
    """Reads segment headers, chunks and payloads from an open file by offset; never raises on bad data.

    Reads stay small: a header, a slot or one payload at a time, and at most ``SCAN_WINDOW`` bytes while
    searching for the next intact item after damage.
    """

    SCAN_WINDOW = 1024 * 1024
    """Bytes read at a time while searching."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        """The open recording."""
        try:
            self._fd: int | None = file.fileno()
        except (OSError, AttributeError, io.UnsupportedOperation):
            self._fd = None

    def read(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``offset`` (fewer at the end of the file).

        With a real file this is ``pread``: readers in several threads share the file without a shared position."""
        if self._fd is not None:
            parts = []
            while size > 0:
                part = os.pread(self._fd, size, offset)
                if not part:
                    break
                parts.append(part)
                offset += len(part)
                size -= len(part)
            return b"".join(parts)
        self.file.seek(offset)
        data: bytes = self.file.read(size)
        return data

    def item(self, offset: int) -> Segment | Chunk | str:
        """The segment header or chunk header at ``offset``; else ``"end"``, ``"cut"`` (the file ends inside
        one) or ``"bad"``. Raises :class:`NewerFormat` for a newer segment."""
        head = self.read(offset, max(HEADER_SIZE, SEGMENT_PREFIX))
        if not head:
            return "end"
        if may_be_compact_magic(head):
            if len(head) < SEGMENT_PREFIX:
                return "cut"
            segment = parse_segment(head, offset)
            if isinstance(segment, int):
                full = self.read(offset, segment)
                if len(full) < segment:
                    return "cut"
                segment = parse_segment(full, offset)
            return segment if isinstance(segment, Segment) else "bad"
        if len(head) < HEADER_SIZE and CHUNK_MAGIC.startswith(head[: len(CHUNK_MAGIC)]):
            return "cut"
        chunk = parse_chunk(head, offset)
        return "bad" if chunk is None else chunk

    def size(self) -> int:
        """The file's current size (it may grow while a recording is being written)."""
        if self._fd is not None:
            return os.fstat(self._fd).st_size
        return self.file.seek(0, os.SEEK_END)

    def payload(self, chunk: Chunk) -> bytes | str:
        """The chunk's payload; ``"cut"`` when the file ends inside it, ``"bad"`` when its checksum fails.

        Nothing is read when the file is too short for it, so a damaged length never allocates."""
        if chunk.end > self.size():
            return "cut"
        data = self.read(chunk.payload_offset, chunk.size)
        if len(data) < chunk.size:
            return "cut"
        return data if zlib.crc32(data) == chunk.crc else "bad"

    def slot(self, chunk: Chunk) -> int | None:
        """The summary offset in a block's first chunk, None when not filled in."""
        return parse_slot(self.read(chunk.offset + HEADER_SIZE, SLOT.size))

    def next_item(self, offset: int) -> int | None:
        """Offset of the first intact segment or chunk header after ``offset``, or None before the end."""
        position = offset + 1
        keep = max(HEADER_SIZE, SEGMENT_PREFIX)
        while True:
            window = self.read(position, self.SCAN_WINDOW + keep)
            if len(window) <= 0:
                return None
            limit = min(len(window), self.SCAN_WINDOW)
            for magic in _scan(window, limit):
                found = self.item(position + magic)
                if not isinstance(found, str) or found == "cut":
                    return position + magic
            if len(window) < self.SCAN_WINDOW + keep:
                return None
            position += limit


def _scan(window: bytes, limit: int) -> list[int]:
    """Offsets below ``limit`` where a chunk or segment magic starts, in order."""
    found = []
    for magic in (CHUNK_MAGIC, *COMPACT_MAGICS):
        at = window.find(magic, 0)
        while 0 <= at < limit:
            found.append(at)
            at = window.find(magic, at + 1)
    return sorted(found)


def encode_events(events: list[AdviceEvent]) -> bytes:
    """The advice events section of a chunk payload: a varint length and a JSON list (empty: one zero byte)."""
    out = bytearray()
    if not events:
        out.append(0)
        return bytes(out)
    text = json.dumps([[e.timestamp, e.advice_id, e.severity.value, e.title, e.raised] for e in events],
                      separators=(",", ":")).encode("ascii")
    put_varint(out, len(text))
    out += text
    return bytes(out)


def decode_events(payload: bytes) -> tuple[list[AdviceEvent], int]:
    """The advice events at the start of a chunk payload and where the rest starts; raises :class:`CodecError`."""
    size, pos = get_varint(payload, 0)
    if not size:
        return [], pos
    try:
        items = json.loads(payload[pos : pos + size].decode("ascii"))
        events = [AdviceEvent(float(t), str(i), Severity(s), str(title), bool(r)) for t, i, s, title, r in items]
    except (ValueError, TypeError, RecursionError):
        raise CodecError("advice events not readable") from None
    return events, pos + size


def encode_summary(start: int, first: float, last: float, count: int, events: list[AdviceEvent]) -> bytes:
    """A block summary chunk's payload."""
    return json.dumps({"start": start, "first": first, "last": last, "count": count}).encode("ascii") + encode_events(events)


def decode_summary(payload: bytes) -> tuple[dict[str, Any], list[AdviceEvent]]:
    """The fields and events of a block summary; raises :class:`CodecError`."""
    end = payload.find(b"}")
    try:
        fields = json.loads(payload[: end + 1].decode("ascii"))
        if not isinstance(fields, dict) or not all(isinstance(fields.get(k), (int, float)) for k in ("start", "first", "last", "count")):
            raise ValueError
    except (ValueError, RecursionError):
        raise CodecError("block summary not readable") from None
    events, _ = decode_events(payload[end + 1 :])
    return fields, events
