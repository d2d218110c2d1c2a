"""The front door to recordings: open any recording for writing, streaming or seeking, whatever its format.

A name decides the format a recording is written in (JSON lines for ``.jsonl``/``.jsonl.gz``, else the
compact format); a file's first bytes decide how it is read, whatever its name.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Generator
from typing import TYPE_CHECKING, BinaryIO

from gpusight.recordings.compact import CompactRecording, CompactWriter, read_compact
from gpusight.recordings.files import open_regular_file, reading
from gpusight.recordings.formats import (
    COMPACT_MAGIC,
    RecordingFormat,
    RecordingProblem,
    SeekableRecording,
    format_for_name,
    sniff_format,
)
from gpusight.recordings.jsonl.index import JsonlRecording
from gpusight.recordings.jsonl.reader import read_jsonl
from gpusight.recordings.jsonl.writer import JsonlWriter
from gpusight.snapshot.model import ProcessRole, Snapshot

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress


def open_recorder(path: str | os.PathLike[str]) -> CompactWriter | JsonlWriter:
    """The writer for a recording at ``path``: JSON lines for ``.jsonl``/``.jsonl.gz`` names, else the compact format.

    Raises :class:`RecordingError` (one line for the user) when the file cannot be opened for writing.
    """
    if format_for_name(path) is RecordingFormat.COMPACT:
        return CompactWriter(path)
    return JsonlWriter(path)


def open_seekable(path: str | os.PathLike[str], progress: ReadProgress | None = None) -> SeekableRecording:
    """Open any recording for random access, its format told by its first bytes; raises ``OSError`` when unreadable.

    ``progress`` is told how far the index scan has got (a compact recording's walk from block to block is quick;
    a JSON-lines recording is read whole).
    """
    with open_regular_file(path) as file:
        head = file.read(len(COMPACT_MAGIC))
    if sniff_format(head) is RecordingFormat.COMPACT:
        return CompactRecording(path, progress)
    return JsonlRecording(path, progress)


def read_recording(
    path: str | os.PathLike[str], progress: ReadProgress | None = None, *, gpu_processes_only: bool = False,
) -> Generator[Snapshot | RecordingProblem, None, None]:
    """Stream a recording's snapshots in order, with a :class:`RecordingProblem` for each unreadable part.

    The file is opened at once, so a missing or unreadable file raises ``OSError`` here, and so does
    anything but a regular file (after symlinks): a FIFO or a device such as ``/dev/zero`` could block
    or never end. The format (compact, JSON lines, gzip) is told by the content, not the name. Never raises while iterating:
    a read error ends the stream with a problem. Closing the iterator closes the file, and ends ``progress``, which is
    told the file's size and how much of it has been read (see :mod:`gpusight.recordings.progress`).

    ``gpu_processes_only``: each snapshot's ``processes`` holds only the processes with a GPU context (role ``gpu``),
    for readers that never look at DataLoader workers (the run report); a compact recording then skips building them.
    """
    return _records(open_regular_file(path), progress, gpu_processes_only)


def _records(file: BinaryIO, progress: ReadProgress | None,
             gpu_processes_only: bool) -> Generator[Snapshot | RecordingProblem, None, None]:
    with file, reading(file, progress):
        if _starts_compact(file):
            yield from read_compact(file, progress, gpu_processes_only=gpu_processes_only)
            return
        for item in read_jsonl(file, progress):
            if gpu_processes_only and isinstance(item, Snapshot):
                item = dataclasses.replace(item, processes=tuple(
                    p for p in item.processes if p.role == ProcessRole.GPU))
            yield item


def _starts_compact(file: BinaryIO) -> bool:
    """True when the file is a compact recording; either way it is left at its start."""
    try:
        head = file.read(len(COMPACT_MAGIC))
        file.seek(0)
    except OSError:
        return False
    return sniff_format(head) is RecordingFormat.COMPACT
