"""JSON lines on stdout: ``--record -`` and ``--convert IN -`` write snapshots there, one per line.

``-`` names stdout wherever a recording's file name is expected. A reader that goes away (``head``,
``jq`` quitting, a dropped ``ssh``) makes the next write fail with ``BrokenPipeError``; the stream
notes it in :attr:`JsonLinesStream.reader_gone` so the command can leave quietly.
"""

from __future__ import annotations

import os
from typing import TextIO

from gpusight.snapshot.model import Snapshot
from gpusight.snapshot.serialize import snapshot_to_json

STDOUT_NAME = "-"
"""The file name that means stdout."""


def names_stdout(path: str | os.PathLike[str] | None) -> bool:
    """True when ``path`` is ``-``, i.e. stdout."""
    return path is not None and os.fspath(path) == STDOUT_NAME


class JsonLinesStream:
    """Writes snapshots as JSON lines (the ``gpusight --json`` schema, one line each) to a text stream.

    A :class:`gpusight.sampling.sampler.SnapshotWriter`. With ``flush_each`` every line is flushed as it
    is written, so a reader at the other end of a pipe sees each snapshot at once. ``close`` flushes
    but leaves the stream open (it is stdout).
    """

    def __init__(self, stream: TextIO, *, flush_each: bool) -> None:
        self.stream = stream
        """Where the lines go."""
        self.flush_each = flush_each
        """Whether every line is flushed as it is written."""
        self.reader_gone = False
        """True once a write found the reading end of the pipe closed."""
        self.bytes_written = 0
        """Bytes of JSON lines written so far."""

    def write(self, snapshot: Snapshot) -> None:
        """Write one snapshot as one line; raises ``BrokenPipeError`` (an ``OSError``) when the reader went away."""
        line = snapshot_to_json(snapshot) + "\n"
        try:
            self.stream.write(line)
            if self.flush_each:
                self.stream.flush()
        except BrokenPipeError:
            self.reader_gone = True
            raise
        self.bytes_written += len(line)

    def close(self) -> None:
        """Flush what is buffered; the stream itself stays open."""
        try:
            self.stream.flush()
        except BrokenPipeError:
            self.reader_gone = True
            raise
