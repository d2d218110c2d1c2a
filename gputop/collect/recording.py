"""Recordings: snapshots appended as JSON lines, optionally gzip-compressed, and read back robustly.

The writer flushes every line (for ``.gz`` files every line is its own gzip member), so a process
killed with SIGKILL loses at most the line it was writing. The reader streams the file, reports each
damaged, oversized or foreign line as a :class:`RecordingProblem` and carries on; damage inside a
gzip file is skipped up to the next intact member.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import stat
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from gputop.collect.compact import CompactRecording, CompactWriter, read_compact
from gputop.collect.jsonl_seek import JsonlRecording
from gputop.collect.model import Snapshot
from gputop.collect.recording_format import (
    COMPACT_MAGIC,
    RecordingFormat,
    RecordingProblem,
    SeekableRecording,
    format_for_name,
    sniff_format,
)
from gputop.collect.recording_format import (
    RecordingError as RecordingError,
)
from gputop.collect.serialize import (
    SnapshotFormatError,
    snapshot_from_dict,
    snapshot_to_json,
)

MAX_LINE_BYTES = 16 * 1024 * 1024
"""Lines longer than this are skipped without being held in memory."""

_READ_CHUNK = 1024 * 1024
_GZIP_MAGIC = b"\x1f\x8b\x08"
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_MAX_MEMBER_KEPT = 16 * 1024 * 1024
"""Compressed bytes of one gzip member kept for resynchronising after damage; beyond it the search
for the next member starts at the point of failure."""


def open_recorder(path: str | os.PathLike[str]) -> CompactWriter | Recorder:
    """The writer for a recording at ``path``: JSON lines for ``.jsonl``/``.jsonl.gz`` names, else the compact format.

    Raises :class:`RecordingError` (one line for the user) when the file cannot be opened for writing.
    """
    if format_for_name(path) is RecordingFormat.COMPACT:
        return CompactWriter(path)
    return Recorder(path)


def open_seekable(path: str | os.PathLike[str]) -> SeekableRecording:
    """Open any recording for random access, its format told by its first bytes; raises ``OSError`` when unreadable."""
    with _open_regular_file(path) as file:
        head = file.read(len(COMPACT_MAGIC))
    if sniff_format(head) is RecordingFormat.COMPACT:
        return CompactRecording(path)
    return JsonlRecording(path)


class Recorder:
    """Appends snapshots to a JSON-lines recording; gzip-compressed when the path ends in ``.gz``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        """Where the recording goes."""
        self.compressed = self.path.endswith(".gz")
        """True when each line is written as its own gzip member."""
        try:
            self._file: BinaryIO | None = open(self.path, "ab")
        except OSError as exc:
            raise RecordingError(f"cannot write recording {self.path}: {exc.strerror or exc}") from exc
        try:
            if not self.compressed:
                _end_partial_line(self._file, self.path)
        except OSError as exc:
            self.close()
            raise RecordingError(f"cannot write recording {self.path}: {exc.strerror or exc}") from exc

    def write(self, snapshot: Snapshot) -> None:
        """Append one snapshot as one line and flush it to the operating system."""
        if self._file is None:
            raise RecordingError(f"recording {self.path} is closed")
        line = snapshot_to_json(snapshot).encode("utf-8") + b"\n"
        if self.compressed:
            line = gzip.compress(line, compresslevel=6, mtime=0)
        try:
            self._file.write(line)
            self._file.flush()
        except OSError as exc:
            raise RecordingError(f"cannot write recording {self.path}: {exc.strerror or exc}") from exc

    def close(self) -> None:
        """Close the file; later writes raise :class:`RecordingError`."""
        if self._file is not None:
            file, self._file = self._file, None
            file.close()


def _end_partial_line(file: BinaryIO, path: str) -> None:
    """When appending to a plain recording that was cut off mid-line, end that line so the next starts clean."""
    if file.tell() == 0:
        return
    with open(path, "rb") as existing:
        existing.seek(-1, os.SEEK_END)
        if existing.read(1) != b"\n":
            file.write(b"\n")
            file.flush()


@dataclass(frozen=True, slots=True)
class _Damage:
    """A break in the decompressed byte stream: the bytes around it are lost."""

    message: str


def read_recording(path: str | os.PathLike[str]) -> Generator[Snapshot | RecordingProblem, None, None]:
    """Stream a recording's snapshots in order, with a :class:`RecordingProblem` for each unreadable part.

    The file is opened at once, so a missing or unreadable file raises ``OSError`` here, and so does
    anything but a regular file (after symlinks): a FIFO or a device such as ``/dev/zero`` could block
    or never end. The format (compact, JSON lines, gzip) is told by the content, not the name. Never raises while iterating:
    a read error ends the stream with a problem. Closing the iterator closes the file.
    """
    return _records(_open_regular_file(path))


def _open_regular_file(path: str | os.PathLike[str]) -> BinaryIO:
    """Open ``path`` for reading if it is a regular file; raise ``OSError`` saying what it is otherwise.

    ``O_NONBLOCK`` keeps the open itself from waiting for a writer when the path is a FIFO.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"not a regular file ({_file_kind(mode)})", os.fspath(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a special file")


_NOT_JSON = "not valid JSON (truncated or corrupt)"
_JSON_WHITE_SPACE = b" \t\r\n"


def _records(file: BinaryIO) -> Generator[Snapshot | RecordingProblem, None, None]:
    with file:
        if _starts_compact(file):
            yield from read_compact(file)
            return
        for number, line, damage in _lines(_chunks(file)):
            if damage is not None:
                yield RecordingProblem(number, damage)
            else:
                text = line.strip(_JSON_WHITE_SPACE)
                if text:
                    yield _parse(number, text)


def _starts_compact(file: BinaryIO) -> bool:
    """True when the file is a compact recording; either way it is left at its start."""
    try:
        head = file.read(len(COMPACT_MAGIC))
        file.seek(0)
    except OSError:
        return False
    return sniff_format(head) is RecordingFormat.COMPACT


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


def _chunks(file: BinaryIO) -> Iterator[bytes | _Damage]:
    """The file's bytes, decompressed when it starts like gzip; a read error ends them with a damage mark."""
    try:
        head = file.read(len(_GZIP_MAGIC))
        if head != _GZIP_MAGIC:
            yield head
            while chunk := file.read(_READ_CHUNK):
                yield chunk
            return
        yield from _gunzip(file, head)
    except OSError as exc:
        yield _Damage(f"read error, rest of the recording skipped: {exc.strerror or exc}")


def _gunzip(file: BinaryIO, head: bytes) -> Iterator[bytes | _Damage]:
    """Decompress consecutive gzip members; skip damaged ones up to the next intact member.

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
    while True:
        if not pending and not drain:
            pending = file.read(_READ_CHUNK)
            if not pending:
                break
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
            searched_from = max(1, len(member) - len(_GZIP_MAGIC) + 1)
            member += pending[:consumed]
            if not decompressor.eof:
                rest = decompressor.unconsumed_tail
                restart = _intact_member_inside(member, searched_from, rest)
                if restart is not None:
                    # The member was cut short and the inflater ran on into the next one.
                    yield _Damage("damaged gzip data (a member was cut short), skipped to the next intact part")
                    pending = restart + rest
                    decompressor = zlib.decompressobj(_GZIP_WBITS)
                    member, resyncing, drain = bytearray(), False, False
                    continue
            if len(member) > _MAX_MEMBER_KEPT:
                member = None
        if out:
            yield out
        if decompressor.eof:
            pending = decompressor.unused_data
            decompressor = zlib.decompressobj(_GZIP_WBITS)
            member, resyncing, drain = bytearray(), False, False
        else:
            pending = decompressor.unconsumed_tail
            drain = not pending and len(out) == _READ_CHUNK
    if (member is None or member) and not resyncing:
        yield _Damage("gzip data cut off at the end of the file (recording interrupted)")


def _intact_member_inside(member: bytearray, start: int, rest: bytes) -> bytes | None:
    """Bytes from a gzip header found in ``member`` at or after ``start`` that decompress as a whole
    member (checksum included), i.e. where an intact member begins inside a damaged one; else None."""
    found = member.find(_GZIP_MAGIC, start)
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
        found = member.find(_GZIP_MAGIC, found + 1)
    return None


def _seek_member(file: BinaryIO, data: bytes, start: int) -> bytes:
    """The bytes from the next gzip member header on, searching ``data`` from ``start`` and then the file."""
    while True:
        found = data.find(_GZIP_MAGIC, start)
        if found >= 0:
            return data[found:]
        more = file.read(_READ_CHUNK)
        if not more:
            return b""
        data = data[-(len(_GZIP_MAGIC) - 1):] + more
        start = 0


def _lines(chunks: Iterator[bytes | _Damage]) -> Iterator[tuple[int, bytes, str | None]]:
    """Split the stream into numbered lines; an oversized, cut-off or damaged line comes with a reason."""
    number = 1
    parts: list[bytes] = []
    size = 0
    too_long = False
    for chunk in chunks:
        if isinstance(chunk, _Damage):
            yield number, b"", chunk.message
            number += 1
            parts, size, too_long = [], 0, False
            continue
        start = 0
        while start < len(chunk):
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
                yield number, b"", f"longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB, skipped"
            else:
                yield number, b"".join(parts), None
            number += 1
            parts, size, too_long = [], 0, False
            start = end + 1
    if too_long:
        yield number, b"", f"longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB, skipped"
    elif any(parts):
        yield number, b"", "incomplete last line (recording interrupted)"
