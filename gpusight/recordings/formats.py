"""Which recording format a file is or will be, and the seekable-reading interface every format offers.

Three formats exist: the compact format (the default for ``--record``, see ``docs/recording.md``), plain
JSON lines (``.jsonl``) and JSON lines gzip-compressed (``.jsonl.gz``). A name decides the format a
recording is written in; a file's first bytes decide how it is read, whatever its name.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from gpusight import old_name
from gpusight.sampling.steering import AdviceEvent
from gpusight.snapshot.model import Severity, Snapshot, StringEnum


class RecordingFormat(StringEnum):
    """How a recording's snapshots are laid out on disk."""

    COMPACT = "compact"
    """Static facts once, then changes, in typed columns inside compressed, seekable blocks."""
    JSONL = "jsonl"
    """One snapshot per line as JSON (schema of ``gpusight --json``)."""
    JSONL_GZ = "jsonl.gz"
    """JSON lines, gzip-compressed."""


COMPACT_MAGIC = b"\x89GSIGHT\r\n\x1a\n"
"""The first bytes of every compact recording this version writes, and of each of its segments (PNG-like: catches
text-mode and 7-bit mangling)."""

COMPACT_MAGICS = (COMPACT_MAGIC, old_name.COMPACT_MAGIC)
"""Every magic a compact recording or segment may start with: this name's and the old name's, of one length."""

assert len({len(magic) for magic in COMPACT_MAGICS}) == 1

GZIP_MAGIC = b"\x1f\x8b\x08"
"""The first bytes of a gzip stream."""


def format_for_name(path: str | os.PathLike[str]) -> RecordingFormat:
    """The format a recording written to ``path`` gets: JSON lines for ``.jsonl``/``.jsonl.gz``, else compact."""
    name = os.fspath(path).lower()
    if name.endswith(".jsonl.gz"):
        return RecordingFormat.JSONL_GZ
    if name.endswith(".jsonl"):
        return RecordingFormat.JSONL
    return RecordingFormat.COMPACT


def is_compact_magic(data: bytes) -> bool:
    """True when ``data`` starts with one of :data:`COMPACT_MAGICS`."""
    return data[: len(COMPACT_MAGIC)] in COMPACT_MAGICS


def may_be_compact_magic(head: bytes) -> bool:
    """True when ``head`` (possibly shorter than a magic, e.g. a file cut short) could start one of :data:`COMPACT_MAGICS`."""
    return any(magic.startswith(head[: len(magic)]) for magic in COMPACT_MAGICS)


def sniff_format(head: bytes) -> RecordingFormat:
    """The format of a file that starts with ``head`` (at least ``len(COMPACT_MAGIC)`` bytes when available)."""
    if is_compact_magic(head):
        return RecordingFormat.COMPACT
    if head.startswith(GZIP_MAGIC):
        return RecordingFormat.JSONL_GZ
    return RecordingFormat.JSONL


class RecordingError(OSError):
    """A recording cannot be opened or written; ``str()`` is a one-line message for the user."""


@dataclass(frozen=True, slots=True)
class RecordingProblem:
    """A part of a recording that could not be read and was skipped."""

    line: int
    """1-based number of the damaged part: a line (in the decompressed text) of JSON lines, a block of compact."""
    message: str
    """What was wrong, e.g. ``"not valid JSON"``."""
    unit: str = "line"
    """What ``line`` counts: ``"line"`` or ``"block"``."""

    def __str__(self) -> str:
        return f"{self.unit} {self.line}: {self.message}"


StandingAdvice = Mapping[str, tuple[Severity, str]]
"""The advice standing at one snapshot: severity and title by ``Advice.id``."""


def advice_changes(timestamp: float, before: StandingAdvice, now: StandingAdvice) -> list[AdviceEvent]:
    """The events at ``timestamp`` between the advice standing ``before`` and ``now``: clearings, then raisings."""
    events = [AdviceEvent(timestamp, advice_id, severity, title, raised=False)
              for advice_id, (severity, title) in before.items() if advice_id not in now]
    events += [AdviceEvent(timestamp, advice_id, severity, title, raised=True)
               for advice_id, (severity, title) in now.items() if advice_id not in before]
    return events


class SeekableRecording(Protocol):
    """A recording opened for random access: its time span, its advice events, and reading from any moment.

    Opening a day-long compact recording, asking its span and events, and getting the first snapshot of
    ``read_from`` together take well under a second (an index or seekable blocks, never a full decode).
    """

    path: str
    """The file."""
    first_timestamp: float
    """Timestamp of the first readable snapshot."""
    last_timestamp: float
    """Timestamp of the last readable snapshot when the file was opened."""

    def read_from(self, timestamp: float | None = None) -> Iterator[Snapshot | RecordingProblem]:
        """Snapshots in order from the last one at or before ``timestamp`` (the first one when None or earlier),
        to the end, with a :class:`RecordingProblem` for each damaged part."""
        ...

    def advice_events(self) -> Sequence[AdviceEvent]:
        """Every advice raising and clearing in the recording, in time order."""
        ...

    def close(self) -> None:
        """Release the file."""
        ...
