"""Writing a JSON-lines recording: one snapshot per line, flushed as written; gzip-compressed for ``.gz`` names.

The writer flushes every line (for ``.gz`` files every line is its own gzip member), so a process
killed with SIGKILL loses at most the line it was writing.
"""

from __future__ import annotations

import gzip
import os
from typing import BinaryIO

from gpusight.recordings.formats import RecordingError
from gpusight.snapshot.model import Snapshot
from gpusight.snapshot.serialize import snapshot_to_json


class JsonlWriter:
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
