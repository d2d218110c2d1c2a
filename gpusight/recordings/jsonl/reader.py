"""Reading JSON-lines recordings (plain or gzip) back, robustly.

The reader streams the file, reports each damaged, oversized or foreign line as a :class:`RecordingProblem`
and carries on; damage inside a gzip file is skipped up to the next intact member.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

from gpusight.recordings.formats import GZIP_MAGIC, RecordingProblem
from gpusight.snapshot.model import Snapshot
from gpusight.snapshot.serialize import SnapshotFormatError, snapshot_from_dict

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress

MAX_LINE_BYTES = 16 * 1024 * 1024
"""Lines longer than this are skipped without being held in memory."""

_READ_CHUNK = 1024 * 1024
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_MAX_MEMBER_KEPT = 16 * 1024 * 1024
"""Compressed bytes of one gzip member kept for resynchronising after damage; beyond it the search
for the next member starts at the point of failure."""


@dataclass(frozen=True, slots=True)
class _Damage:
    """A break in the decompressed byte stream: the bytes around it are lost."""

    message: str


@dataclass(frozen=True, slots=True)
class _Origin:
    """Where the stream's next bytes come from in the file: reading can start again at ``offset``."""

    offset: int
    """File offset of the next byte (plain text) or of the gzip member that makes it."""
    linear: bool
    """True for plain text, where every later byte sits at ``offset`` plus its distance; False inside gzip."""


Line = tuple[int, bytes, str | None, int | None]
"""One line of a JSON-lines stream: its 1-based number, its bytes (empty when damaged), what is wrong with it
(None when nothing), and the file offset reading can start at to get this line first (None when unknown)."""


_NOT_JSON = "not valid JSON (truncated or corrupt)"
_JSON_WHITE_SPACE = b" \t\r\n"


def jsonl_lines(file: BinaryIO, number: int = 1, progress: ReadProgress | None = None) -> Iterator[Line]:
    """The numbered lines of a JSON-lines recording (plain or gzip) from ``file``'s position, ``number`` the first's.

    The position must be the file's start or an offset given with an earlier line (the start of a
    plain line or of a gzip member): see :data:`Line`. ``progress`` is told the file's position after
    each piece read (never begun nor ended here).
    """
    chunks = _chunks(file)
    return _lines(chunks if progress is None else _reporting(chunks, file, progress), number)


def read_jsonl(file: BinaryIO, progress: ReadProgress | None = None) -> Iterator[Snapshot | RecordingProblem]:
    """The snapshots of a JSON-lines recording (plain or gzip) from ``file``'s start, with a problem for each damaged line.

    ``progress`` is told the file's position after each piece read.
    """
    return line_records(jsonl_lines(file, progress=progress))


def line_records(lines: Iterator[Line]) -> Iterator[Snapshot | RecordingProblem]:
    """The snapshot on each non-blank line, or the :class:`RecordingProblem` with it."""
    for number, line, damage, _anchor in lines:
        if damage is not None:
            yield RecordingProblem(number, damage)
        else:
            text = line.strip(_JSON_WHITE_SPACE)
            if text:
                yield _parse(number, text)


def _parse(number: int, line: bytes) -> Snapshot | RecordingProblem:
    """The snapshot on a non-blank line stripped of white space, or what is wrong with it."""
    if line[:1] == b"{" and line[-1:] != b"}":
        return RecordingProblem(number, _NOT_JSON)  # the usual damage, a cut-off line, without the cost of a parse
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return RecordingProblem(number, "not valid UTF-8")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return RecordingProblem(number, _NOT_JSON)
    try:
        return snapshot_from_dict(data)
    except SnapshotFormatError as exc:
        return RecordingProblem(number, str(exc))


def _chunks(file: BinaryIO) -> Iterator[bytes | _Damage | _Origin]:
    """The file's bytes from its position, decompressed when they start like gzip; a read error ends them with a
    damage mark. Origin marks say where reading could start again."""
    try:
        start = file.tell()
        head = file.read(len(GZIP_MAGIC))
        if head != GZIP_MAGIC:
            yield _Origin(start, linear=True)
            yield head
            while chunk := file.read(_READ_CHUNK):
                yield chunk
            return
        yield from _gunzip(file, head)
    except OSError as exc:
        yield _Damage(f"read error, rest of the recording skipped: {exc.strerror or exc}")


def _reporting(chunks: Iterator[bytes | _Damage | _Origin], file: BinaryIO,
               progress: ReadProgress) -> Iterator[bytes | _Damage | _Origin]:
    """``chunks``, telling ``progress`` the file's position (what has been read of it) before handing each on."""
    for chunk in chunks:
        progress.reached(file.tell())
        yield chunk


def _gunzip(file: BinaryIO, head: bytes) -> Iterator[bytes | _Damage | _Origin]:
    """Decompress consecutive gzip members; skip damaged ones up to the next intact member.

    Each member that starts after a clean end (or at the start) is preceded by an origin mark: decompressing
    from there later gives the same bytes.

    Output is produced in bounded pieces, so a member that inflates enormously is never held whole.
    The compressed bytes of the current member are kept (up to ``_MAX_MEMBER_KEPT``) so that, when
    it turns out damaged, the search for the next member starts right after its header: a member
    cut off by a crash and followed by appended members may only fail well inside them.
    """
    pending = head
    decompressor = zlib.decompressobj(_GZIP_WBITS)
    member: bytearray | None = bytearray()  # compressed bytes of the current member consumed so far
    resyncing = False  # damage reported; quiet until a member decompresses whole
    drain = False  # the last call filled its output limit, so more output may be waiting
    fresh = True  # a member starts with the next byte of pending, after a clean end
    while True:
        if not pending and not drain:
            pending = file.read(_READ_CHUNK)
            if not pending:
                break
        if fresh:
            yield _Origin(file.tell() - len(pending), linear=False)
            fresh = False
        try:
            out = decompressor.decompress(pending, _READ_CHUNK)
        except zlib.error as exc:
            if not resyncing:
                yield _Damage(f"damaged gzip data ({exc}), skipped to the next intact part")
            resyncing = True
            pending = _seek_member(file, bytes(member) + pending, 1) if member is not None else _seek_member(file, pending, 0)
            decompressor = zlib.decompressobj(_GZIP_WBITS)
            member, drain = bytearray(), False
            continue
        if decompressor.eof:
            consumed = len(pending) - len(decompressor.unused_data)
        else:
            consumed = len(pending) - len(decompressor.unconsumed_tail)
        if member is not None:
            searched_from = max(1, len(member) - len(GZIP_MAGIC) + 1)
            member += pending[:consumed]
            if not decompressor.eof:
                rest = decompressor.unconsumed_tail
                restart = _intact_member_inside(member, searched_from, rest)
                if restart is not None:
                    # The member was cut short and the inflater ran on into the next one.
                    yield _Damage("damaged gzip data (a member was cut short), skipped to the next intact part")
                    pending = restart + rest
                    decompressor = zlib.decompressobj(_GZIP_WBITS)
                    member, resyncing, drain, fresh = bytearray(), False, False, True
                    continue
            if len(member) > _MAX_MEMBER_KEPT:
                member = None
        if out:
            yield out
        if decompressor.eof:
            pending = decompressor.unused_data
            decompressor = zlib.decompressobj(_GZIP_WBITS)
            member, resyncing, drain, fresh = bytearray(), False, False, True
        else:
            pending = decompressor.unconsumed_tail
            drain = not pending and len(out) == _READ_CHUNK
    if (member is None or member) and not resyncing:
        yield _Damage("gzip data cut off at the end of the file (recording interrupted)")


def _intact_member_inside(member: bytearray, start: int, rest: bytes) -> bytes | None:
    """Bytes from a gzip header found in ``member`` at or after ``start`` that decompress as a whole
    member (checksum included), i.e. where an intact member begins inside a damaged one; else None."""
    found = member.find(GZIP_MAGIC, start)
    while found >= 0:
        candidate = bytes(member[found:]) + rest
        probe = zlib.decompressobj(_GZIP_WBITS)
        try:
            probe.decompress(candidate, _READ_CHUNK)
        except zlib.error:
            pass
        else:
            if probe.eof:
                return bytes(member[found:])
        found = member.find(GZIP_MAGIC, found + 1)
    return None


def _seek_member(file: BinaryIO, data: bytes, start: int) -> bytes:
    """The bytes from the next gzip member header on, searching ``data`` from ``start`` and then the file."""
    while True:
        found = data.find(GZIP_MAGIC, start)
        if found >= 0:
            return data[found:]
        more = file.read(_READ_CHUNK)
        if not more:
            return b""
        data = data[-(len(GZIP_MAGIC) - 1):] + more
        start = 0


def _lines(chunks: Iterator[bytes | _Damage | _Origin], number: int = 1) -> Iterator[Line]:
    """Split the stream into numbered lines; an oversized, cut-off or damaged line comes with a reason."""
    parts: list[bytes] = []
    size = 0
    too_long = False
    origin: _Origin | None = None
    consumed = 0  # stream bytes since the origin
    fresh = True  # the next byte starts a line
    anchor: int | None = None  # where reading can start to get the line being built
    for chunk in chunks:
        if isinstance(chunk, _Origin):
            origin, consumed = chunk, 0
            if fresh:
                anchor = chunk.offset
            continue
        if isinstance(chunk, _Damage):
            yield number, b"", chunk.message, None
            number += 1
            parts, size, too_long, origin, fresh, anchor = [], 0, False, None, True, None
            continue
        base = consumed
        consumed += len(chunk)
        start = 0
        while start < len(chunk):
            if fresh and anchor is None and origin is not None and origin.linear:
                anchor = origin.offset + base + start
            fresh = False
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not too_long:
                size += len(piece)
                if size > MAX_LINE_BYTES:
                    too_long, parts = True, []
                else:
                    parts.append(piece)
            if end < 0:
                break
            if too_long:
                yield number, b"", f"longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB, skipped", anchor
            else:
                yield number, b"".join(parts), None, anchor
            number += 1
            parts, size, too_long, fresh, anchor = [], 0, False, True, None
            start = end + 1
    if too_long:
        yield number, b"", f"longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB, skipped", anchor
    elif any(parts):
        yield number, b"", "incomplete last line (recording interrupted)", anchor
